# Runs every privileged test of every test executable, one test per
# process, each under a time limit; keeps going after a failure. The
# arguments are a libtest filter (substrings of test names).
# PINCER_ONLY_SUITES or PINCER_SKIP_SUITES (executable names, separated by
# spaces) choose the executables: the real-tools suite runs in the Debian
# guest, the others in busybox guests.
#
# One process per test so that a test that hangs is a failed test with a
# diagnosis, not a guest that never finishes: past its limit it is killed,
# what every process was doing is printed, and whatever it left running
# (pincer, its agents) is killed before the next test starts.
# The longest tests load the programs once or twice: up to 270 s in a 6.1
# guest beside the others on two cores, and a slower machine stretches that
# by half again.
limit=${PINCER_TEST_LIMIT:-450}
# Loading the programs verifies them, which under emulation takes half a
# minute or more; a run that ends cleanly leaves them idle for the next one
# to take over. Here they wait for the next test however long this one took
# (a test that needs a fresh load or none left says so with `--linger 0`
# or by removing the idle sets).
export PINCER_LINGER=${PINCER_LINGER:-2h}
failed=0
found=0
# `EXECUTABLE TEST`: a guest booted again after the emulator faulted (see
# `xtask/src/test.rs`) starts at the test that was running then; what ran
# before it has been counted already.
resume=${PINCER_RESUME_AT:-}

# What each process is doing: its state, its kernel stack when it is not
# running, so a hang names the code that waits.
diagnose() {
    echo "==== processes at the time limit"
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        [ -r "$dir/status" ] || continue
        # Kernel threads have no command line.
        [ -s "$dir/cmdline" ] || continue
        state=$(sed -n 's/^State:[[:space:]]*//p' "$dir/status")
        echo "-- $pid $(cat "$dir/comm") [$state] $(tr '\0' ' ' < "$dir/cmdline" | cut -c1-160)"
        [ -r "$dir/stack" ] && sed 's/^/     /' "$dir/stack"
    done
    echo "==== pending: $(pincer pending --json 2>&1 | cut -c1-400)"
}

# Leaves nothing of a killed test for the next one: its pincer processes,
# its agents, its cgroups. Pins stay; the next run sweeps what is over.
clean_up() {
    for dir in /proc/[0-9]*; do
        case "$(cat "$dir/comm" 2>/dev/null)" in
        pincer | pincer-probe) kill -9 "${dir#/proc/}" 2>/dev/null ;;
        esac
    done
    for cgroup in /sys/fs/cgroup/pincer/*/; do
        [ -d "$cgroup" ] || continue
        echo 1 > "$cgroup/cgroup.kill" 2>/dev/null
        rmdir "$cgroup" 2>/dev/null
    done
}

# The tests of removal: each removes every set of programs it finds, so the
# test after it loads them again (over a minute in a 6.1 guest). They run
# last, where the test after the last one is none. The daemon's comes
# first, to take over the set the other tests left: it removes its
# programs halfway and loads them again, so after another test of removal
# it would load twice within its time limit.
removers=" sigterm_keeps_the_pins_and_uninstall_removes_them \
a_clean_run_leaves_its_programs_idle_for_the_next_run_which_starts_clean \
nothing_is_left_behind_after_exit a_killed_twin_leaves_no_task_stopped \
nothing_is_left_behind_after_sigterm "

# The plan: `EXECUTABLE TEST` lines, in the order they run.
plan=$(mktemp)
removals=$(mktemp)
for exe in /bin/pincer-tests-*; do
    [ -x "$exe" ] || continue
    name=${exe#/bin/}
    if [ -n "${PINCER_ONLY_SUITES:-}" ]; then
        case " $PINCER_ONLY_SUITES " in *" $name "*) ;; *) continue ;; esac
    fi
    case " ${PINCER_SKIP_SUITES:-} " in *" $name "*) continue ;; esac
    found=$((found + 1))
    # `name: test` lines; a filter narrows them as libtest would.
    for test in $("$exe" --list --format terse "$@" 2>/dev/null | sed -n 's/: test$//p'); do
        case "$removers" in
        *" $test "*) echo "$name $test" >> "$removals" ;;
        *) echo "$name $test" >> "$plan" ;;
        esac
    done
done
for test in $removers; do
    grep " $test\$" "$removals" >> "$plan"
done

suite=
# The plan on its own descriptor: a test reading its standard input must
# not read the plan.
while read -r name test <&3; do
    if [ -n "$resume" ]; then
        [ "$name $test" = "$resume" ] || continue
        resume=
    fi
    exe=/bin/$name
    if [ "$name" != "$suite" ]; then
        echo "==== $name"
        suite=$name
    fi
    echo "==== start $name $test"
    # Each test's duration, so the log shows where the guest's time goes
    # (libtest reads RUSTC_BOOTSTRAP at run time for its unstable options).
    started=$(cut -d. -f1 /proc/uptime)
    RUSTC_BOOTSTRAP=1 timeout -k 10 "$limit" "$exe" --exact "$test" \
        --test-threads=1 -Zunstable-options --report-time
    rc=$?
    # busybox's timeout reports the signal that ended the test (143,
    # 137), coreutils' 124: the clock tells a timeout from a crash.
    if [ "$rc" -ne 0 ] && [ $(($(cut -d. -f1 /proc/uptime) - started)) -ge "$limit" ]; then
        echo "test $test ... FAILED: still running after $limit s, killed"
        echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out"
        diagnose
        clean_up
    fi
    if [ "$rc" -ne 0 ]; then
        echo "==== $name $test failed with status $rc"
        failed=$((failed + 1))
    fi
    # How many sets of programs are left idle: a test that loaded when
    # it could have taken one over shows as a test that grew the count.
    idle=$(ls /sys/fs/bpf/pincer-idle 2>/dev/null | wc -l)
    echo "==== $test: $(($(cut -d. -f1 /proc/uptime) - started)) s, $idle idle set(s) after it"
done 3< "$plan"
rm -f "$plan" "$removals"
if [ -n "$resume" ]; then
    echo "==== no test $resume to resume at"
    failed=1
fi
if [ "$found" -eq 0 ]; then
    echo "==== no test executables"
    failed=1
fi
[ "$failed" -eq 0 ]
