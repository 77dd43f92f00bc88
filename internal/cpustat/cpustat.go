// Package cpustat reads CPU time: a process's from /proc/<pid>/stat (a
// server under load, as a separate process) and this process's own from
// getrusage (the load generator). The load generators report both as
// cores, CPU-seconds per wall second. Linux only; it must not import the
// rest of Parley.
package cpustat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// Process returns a process's user+system CPU time so far.
func Process(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (time.Duration, error) {
	// The command name (field 2) may hold spaces: count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/<pid>/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// Self is this process's user+system CPU time so far (0 if unreadable).
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Cores is CPU time over wall time.
func Cores(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}
