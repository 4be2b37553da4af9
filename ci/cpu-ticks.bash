# ci/cpu-ticks.bash: sourced by ci/test (the host's phases) and ci/lab-tests (a guest's
# test binaries) for one reading of the machine's CPU time.
#
# cpu_ticks prints "BUSY ALL": the CPU time spent so far, busy and in all (busy, idle and
# iowait), in clock ticks (getconf CLK_TCK a second), from /proc/stat's first line.
cpu_ticks() {
    local _cpu user nice system idle iowait irq softirq steal _rest
    read -r _cpu user nice system idle iowait irq softirq steal _rest < /proc/stat
    local busy=$((user + nice + system + irq + softirq + steal))
    echo "$busy $((busy + idle + iowait))"
}
