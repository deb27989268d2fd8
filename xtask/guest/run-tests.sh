# Runs every privileged test executable with the arguments given to this
# script (a libtest filter); keeps going after a failure.
failed=0
found=0
for exe in /bin/pincer-tests-*; do
    [ -x "$exe" ] || continue
    found=$((found + 1))
    name=${exe#/bin/}
    echo "==== $name"
    # Each test's duration, so the log shows where the guest's time goes
    # (libtest reads RUSTC_BOOTSTRAP at run time for its unstable options).
    RUSTC_BOOTSTRAP=1 "$exe" --test-threads=1 -Zunstable-options --report-time "$@"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "==== $name failed with status $rc"
        failed=$((failed + 1))
    fi
done
if [ "$found" -eq 0 ]; then
    echo "==== no test executables"
    failed=1
fi
[ "$failed" -eq 0 ]
