# Runs every privileged test executable with the arguments given to this
# script (a libtest filter); keeps going after a failure.
failed=0
found=0
for exe in /bin/pincer-tests-*; do
    [ -x "$exe" ] || continue
    found=$((found + 1))
    name=${exe#/bin/}
    echo "==== $name"
    "$exe" --test-threads=1 "$@"
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
