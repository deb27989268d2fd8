# Guest side of `cargo xtask bench`: the cost of a granted open.
#
# The same open+close loop is timed in three settings, interleaved round by
# round so drift of the emulated machine hits all three alike:
#   none     no pincer program attached
#   outside  programs attached (an agent is running), this process outside
#            every agent cgroup
#   inside   inside the agent cgroup, the file granted by a tree grant
# Reported: the median ns per open+close of each, and the ratios to `none`.
#
# Then the tree walk and a parked request's round trip (below).
# BENCH_PARTS chooses the parts that run, of `open` (the granted open),
# `walk` (the tree walk) and `round-trip`: all by default
# (`cargo xtask bench --round-trip` runs only the last). ROUND_TRIPS repeats
# the round trip, each run next to its own ping-pong.
set -eu
BENCH_PARTS=${BENCH_PARTS:-open walk round-trip}
ROUND_TRIPS=${ROUND_TRIPS:-1}
wants() { case " $BENCH_PARTS " in *" $1 "*) ;; *) return 1 ;; esac; }
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Every run detaches its programs at the end, so `none` has none attached.
# Idle programs a run leaves for the next cost what `outside` measures:
# attached, with no agent to find.
export PINCER_LINGER=0
mkdir -p /tmp/bench
cat > /tmp/bench/mission.toml <<MISSION
[mission]
name = "bench"
[[grant]]
path = "/tmp/bench/project"
ops = ["read"]
extent = "tree"
MISSION

open_close() {
    ROUNDS=${ROUNDS:-7}
    ITERS=${ITERS:-20000}
    dir=/tmp/bench/project/src/deep
    mkdir -p "$dir"
    file="$dir/file.txt"
    echo data > "$file"

    : > /tmp/bench/none; : > /tmp/bench/outside; : > /tmp/bench/inside
    pincer-bench open-close "$file" "$ITERS" > /dev/null   # warm caches
    round=1
    while [ "$round" -le "$ROUNDS" ]; do
        pincer-bench open-close "$file" "$ITERS" >> /tmp/bench/none

        pincer run --mission /tmp/bench/mission.toml --audit /tmp/bench/audit.jsonl -- pincer-probe sleep 600 &
        agent=$!
        while [ -z "$(ls /sys/fs/cgroup/pincer 2>/dev/null)" ]; do sleep 0.05; done
        pincer-bench open-close "$file" "$ITERS" >> /tmp/bench/outside
        kill -TERM "$agent"; wait "$agent" || true

        pincer run --mission /tmp/bench/mission.toml --audit /tmp/bench/audit.jsonl -- pincer-bench open-close "$file" "$ITERS" >> /tmp/bench/inside
        round=$((round + 1))
    done

    none=$(median /tmp/bench/none)
    outside=$(median /tmp/bench/outside)
    inside=$(median /tmp/bench/inside)
    echo
    echo "open+close of a granted file, $ROUNDS rounds x $ITERS iterations, kernel $(uname -r)"
    printf '%-34s %12s %8s\n' "setting" "ns/op (med)" "ratio"
    printf '%-34s %12s %8s\n' "no program attached" "$none" "1.000"
    printf '%-34s %12s %8s\n' "attached, outside agent cgroups" "$outside" "$(awk "BEGIN { printf \"%.3f\", $outside / $none }")"
    printf '%-34s %12s %8s\n' "inside the agent cgroup (granted)" "$inside" "$(awk "BEGIN { printf \"%.3f\", $inside / $none }")"
    echo "targets: inside <= 1.05, outside <= 1.01"
    echo "raw none:    $(tr '\n' ' ' < /tmp/bench/none)"
    echo "raw outside: $(tr '\n' ' ' < /tmp/bench/outside)"
    echo "raw inside:  $(tr '\n' ' ' < /tmp/bench/inside)"
}

# The tree walk: the first open of an object inside the agent cgroup misses
# the grant cache and walks the object's ancestors up to the tree grant. Each
# run opens FIRSTS distinct files once, at several depths below the grant, and
# is timed next to the same opens with no program attached (the kernel's own
# path lookup grows with the depth too, so the ratio is the walk's share).
walk() {
    FIRSTS=${FIRSTS:-3000}
    WALK_ROUNDS=${WALK_ROUNDS:-7}
    echo
    echo "first open of $FIRSTS distinct files (grant cache miss: the tree walk), $WALK_ROUNDS rounds"
    printf '%-34s %12s %12s %8s\n' "levels below the tree grant" "none (ns)" "inside (ns)" "ratio"
    for depth in 3 100 1000; do
        dir=/tmp/bench/project/walk$depth
        level=1
        while [ "$level" -lt "$depth" ]; do dir="$dir/d"; level=$((level + 1)); done
        mkdir -p "$dir"
        i=0
        while [ "$i" -lt "$FIRSTS" ]; do : > "$dir/$i"; i=$((i + 1)); done
        : > /tmp/bench/walk-none; : > /tmp/bench/walk-inside
        pincer-bench open-each "$dir" "$FIRSTS" > /dev/null   # warm the dentry cache
        round=1
        while [ "$round" -le "$WALK_ROUNDS" ]; do
            pincer-bench open-each "$dir" "$FIRSTS" >> /tmp/bench/walk-none
            pincer run --mission /tmp/bench/mission.toml --audit /tmp/bench/audit.jsonl -- pincer-bench open-each "$dir" "$FIRSTS" >> /tmp/bench/walk-inside
            round=$((round + 1))
        done
        none=$(median /tmp/bench/walk-none)
        inside=$(median /tmp/bench/walk-inside)
        printf '%-34s %12s %12s %8s\n' "$depth" "$none" "$inside" "$(awk "BEGIN { printf \"%.3f\", $inside / $none }")"
        echo "raw none:    $(tr '\n' ' ' < /tmp/bench/walk-none)"
        echo "raw inside:  $(tr '\n' ' ' < /tmp/bench/walk-inside)"
    done
}

# A parked request's round trip: the mission voter allows every read of the
# secret once, so each open parks, is voted on and resumes. Interleaved with
# it one by one, in the same process, a pipe ping-pong with a second process
# (pipes pass no hook). Then where its time goes:
# the twin times each request's stages into its verdict line; what is left of
# the round trip is the task's (woken by SIGCONT, scheduled, its syscall
# restarted and decided again on the verdict).
round_trip() {
    mkdir -p /tmp/bench/secret
    echo key > /tmp/bench/secret/key
    cat > /tmp/bench/ask.toml <<MISSION
[mission]
name = "bench-ask"
[defaults]
on_unknown = "ask"
[vote]
voters = ["mission"]
timeout = "10s"
[[vote.rule]]
path = "/tmp/bench/secret"
extent = "tree"
verdict = "allow"
MISSION
    PARKS=${PARKS:-300}
    : > /tmp/bench/ratios
    : > /tmp/bench/floors
    run=1
    while [ "$run" -le "$ROUND_TRIPS" ]; do
        rm -f /tmp/bench/ask.jsonl
        both=$(pincer run --mission /tmp/bench/ask.toml --audit /tmp/bench/ask.jsonl -- pincer-bench round-trip /tmp/bench/secret/key "$PARKS")
        parked=$(echo "$both" | sed -n 1p)
        pingpong=$(echo "$both" | sed -n 2p)
        stopcont=$(echo "$both" | sed -n 3p)
        total=${parked%% *}
        ratio=$(awk "BEGIN { printf \"%.2f\", $total / ${pingpong%% *} }")
        floor=$(awk "BEGIN { printf \"%.2f\", ${stopcont%% *} / ${pingpong%% *} }")
        echo "$ratio" >> /tmp/bench/ratios
        echo "$floor" >> /tmp/bench/floors
        echo
        echo "parked request round trip (event -> vote -> verdict -> running), $PARKS requests interleaved with as many pipe round trips, run $run of $ROUND_TRIPS"
        printf '%-34s %10s %10s\n' "" "p50 (us)" "p99 (us)"
        printf '%-34s %10s %10s\n' "parked open, mission voter" $parked
        printf '%-34s %10s %10s\n' "pipe ping-pong (baseline)" $pingpong
        printf '%-34s %10s\n' "p50 ratio, round trip / ping-pong" "$ratio"
        printf '%-34s %10s %10s\n' "stop + continue, no pincer (floor)" $stopcont
        printf '%-34s %10s\n' "p50 ratio, floor / ping-pong" "$floor"

        kernel=$(stage kernel_to_twin_us)
        sanitize=$(stage sanitize_us)
        vote=$(stage vote_us)
        answer=$(stage answer_us)
        echo
        echo "parked round trip by stage, median of $PARKS requests (us)"
        printf '%-60s %8s\n' "kernel event -> the twin takes it off the ring buffer" "$kernel"
        printf '%-60s %8s\n' "sanitizing the request (its /proc reads)" "$sanitize"
        printf '%-60s %8s\n' "votes (the mission voter's, decided at once)" "$vote"
        printf '%-60s %8s\n' "writing the verdict and SIGCONT" "$answer"
        printf '%-60s %8s\n' "the task: woken, scheduled, syscall restarted (the rest)" "$(awk "BEGIN { printf \"%.0f\", $total - $kernel - $sanitize - $vote - $answer }")"
        printf '%-60s %8s\n' "round trip (p50)" "$total"
        run=$((run + 1))
    done
    if [ "$ROUND_TRIPS" -gt 1 ]; then
        echo
        echo "p50 ratios of the $ROUND_TRIPS runs: $(tr '\n' ' ' < /tmp/bench/ratios)"
        echo "floor ratios of the $ROUND_TRIPS runs: $(tr '\n' ' ' < /tmp/bench/floors)"
    fi

    # The programs' own part, from the kernel's statistics over one more
    # run: kept off in the timed runs, as they add two clock reads to every
    # program's every invocation. A parked open runs file_open twice: the
    # call that parks and the restarted call that finds the verdict.
    echo 1 > /proc/sys/kernel/bpf_stats_enabled
    pincer-bench program-stats > /tmp/bench/stats-before
    pincer run --mission /tmp/bench/ask.toml --audit /tmp/bench/ask.jsonl -- pincer-bench round-trip /tmp/bench/secret/key "$PARKS" --no-floor > /dev/null
    pincer-bench program-stats > /tmp/bench/stats-after
    echo 0 > /proc/sys/kernel/bpf_stats_enabled
    echo
    echo "the programs in one more run of $PARKS parked opens, from the kernel's statistics"
    printf '%-20s %12s %16s %12s\n' "program" "invocations" "per parked open" "us each"
    awk -v parks="$PARKS" '
        NR == FNR { runs[$1] = $2; ns[$1] = $3; next }
        $2 > runs[$1] {
            n = $2 - runs[$1]
            printf "%-20s %12d %16.2f %12.1f\n", $1, n, n / parks, ($3 - ns[$1]) / n / 1000
        }' /tmp/bench/stats-before /tmp/bench/stats-after
}
stage() { sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p" /tmp/bench/ask.jsonl > /tmp/bench/stage; median /tmp/bench/stage; }

if wants open; then open_close; fi
if wants walk; then walk; fi
if wants round-trip; then round_trip; fi
