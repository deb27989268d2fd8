# Demo scenario, run inside the VM by `cargo xtask demo`.
echo "demo placeholder"
exit 0
