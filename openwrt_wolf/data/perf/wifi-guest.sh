#!/bin/sh
# wolf-wifi: the Wi-Fi test's helper inside the guest (busybox ash), installed as
# /usr/bin/wolf-wifi by targets/vm/wifiguest.py and run by perf/wifi.py over the console.
#
#   wolf-wifi wait FILE PATTERN COUNT SECONDS
#       until FILE has COUNT lines holding PATTERN (fixed string); exit 1 after SECONDS
#   wolf-wifi cpu PID...
#       "cpu <ns> ..." : each process's time on a CPU (/proc/PID/schedstat, first field), or
#       "ticks <n> ..." (utime+stime of /proc/PID/stat) where the kernel has no schedstat
#   wolf-wifi connect WPA_CLI STA_LOG AP_LOG AP_PID STA_PID SECONDS
#       one timed connection of the station: disconnect it (and wait until the AP saw it go),
#       forget its PMKSA cache (so the next connection authenticates in full), read both
#       daemons' CPU time, reconnect, wait for CTRL-EVENT-CONNECTED and AP-STA-CONNECTED,
#       read the CPU time again. Prints "cpu-before", "cpu-after" and "result ok|timeout".
#
# Polls sleep 0.2 s of guest time between looks: a poll is a process of its own on the guest's
# one CPU, so polling less often disturbs the daemons' timing less.
set -u

count() {
	n=$(grep -c -F -- "$2" "$1" 2>/dev/null)
	echo "${n:-0}"
}

wait_for() {
	file=$1 pattern=$2 want=$3 seconds=$4
	polls=$((seconds * 5))
	while [ "$(count "$file" "$pattern")" -lt "$want" ]; do
		polls=$((polls - 1))
		[ "$polls" -lt 0 ] && return 1
		sleep 0.2
	done
	return 0
}

ticks_of() {
	# utime+stime: fields 14 and 15 of /proc/PID/stat, counted after "(comm) " (which may hold
	# spaces)
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo -1; return; }
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	echo $((${12} + ${13}))
}

cpu() {
	# the time on a CPU in ns (schedstat), or, on a kernel without CONFIG_SCHED_INFO (OpenWrt's
	# malta), utime+stime in clock ticks of 10 ms (USER_HZ); ticks are printed as they are, the
	# lab converts them (32-bit ash arithmetic would overflow in ns)
	if [ -r "/proc/$1/schedstat" ]; then
		line=cpu
		for pid in "$@"; do
			read -r ns _ < "/proc/$pid/schedstat" || ns=-1
			line="$line $ns"
		done
	else
		line=ticks
		for pid in "$@"; do
			line="$line $(ticks_of "$pid")"
		done
	fi
	echo "$line"
}

case "${1:-}" in
wait)
	shift
	wait_for "$@" || { echo "timeout: $3 x '$2' not in $1 after $4 s"; exit 1; }
	;;
cpu)
	shift
	cpu "$@"
	;;
connect)
	cli=$2 sta_log=$3 ap_log=$4 ap=$5 sta=$6 seconds=$7
	gone=$(count "$ap_log" AP-STA-DISCONNECTED)
	if $cli status | grep -q '^wpa_state=COMPLETED'; then
		$cli disconnect > /dev/null
		wait_for "$ap_log" AP-STA-DISCONNECTED $((gone + 1)) "$seconds" ||
			echo "note: the AP did not report the station gone"
	else
		$cli disconnect > /dev/null
	fi
	$cli pmksa_flush > /dev/null
	up_sta=$(count "$sta_log" CTRL-EVENT-CONNECTED)
	up_ap=$(count "$ap_log" AP-STA-CONNECTED)
	echo "cpu-before $(cpu "$ap" "$sta")"
	$cli reconnect > /dev/null
	if wait_for "$sta_log" CTRL-EVENT-CONNECTED $((up_sta + 1)) "$seconds" &&
		wait_for "$ap_log" AP-STA-CONNECTED $((up_ap + 1)) "$seconds"; then
		echo "cpu-after $(cpu "$ap" "$sta")"
		echo "result ok"
	else
		echo "cpu-after $(cpu "$ap" "$sta")"
		echo "result timeout"
	fi
	;;
*)
	echo "usage: wolf-wifi wait|cpu|connect ..." >&2
	exit 2
	;;
esac
