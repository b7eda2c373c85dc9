package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc. It is 100 on
// every Linux architecture Go supports (the kernel fixes it for user space;
// sysconf(_SC_CLK_TCK) would need cgo to ask).
const clockTicks = 100

// parseProcStat returns the user and system CPU time of a process from the
// contents of /proc/<pid>/stat. The command name (field 2) is in parentheses
// and may itself contain spaces and parentheses, so the fields are counted
// from the last ')'.
func parseProcStat(b []byte) (user, system time.Duration, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("proc stat: no ')' after the command name")
	}
	// Fields after the command name start with field 3 (state); utime and
	// stime are fields 14 and 15.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	ut, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("proc stat: utime %q: %v", f[11], err)
	}
	st, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("proc stat: stime %q: %v", f[12], err)
	}
	return ticks(ut), ticks(st), nil
}

func ticks(n uint64) time.Duration {
	return time.Duration(n) * time.Second / clockTicks
}

// processCPU returns the CPU time (user + system) a process has used so far.
// pid 0 means this process.
func processCPU(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	u, s, err := parseProcStat(b)
	return u + s, err
}

// parseStatusKB returns the value of a "Key:   1234 kB" line of
// /proc/<pid>/status, in bytes.
func parseStatusKB(b []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != key {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: %s: unexpected value %q", key, rest)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc status: %s: %v", key, err)
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("proc status: no %s line", key)
}

// peakRSS returns a process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM")
}

// machineCPU is a reading of the aggregate "cpu" line of /proc/stat.
type machineCPU struct {
	busy, total time.Duration
}

// parseMachineCPU reads the first line of /proc/stat: user nice system idle
// iowait irq softirq steal [guest guest_nice]. Busy time is everything but
// idle and iowait; guest time is already counted in user and nice.
func parseMachineCPU(b []byte) (machineCPU, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("proc stat: unexpected first line %q", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("proc stat: %v", err)
		}
		v[i] = n
	}
	var total uint64
	for _, n := range v {
		total += n
	}
	idle := v[3] + v[4]
	return machineCPU{busy: ticks(total - idle), total: ticks(total)}, nil
}

// readMachineCPU reads /proc/stat.
func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	return parseMachineCPU(b)
}

// parseCPUModel returns the first "model name" of /proc/cpuinfo.
func parseCPUModel(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// cpuSample is the CPU time of the server, of this process (generator and
// worker), of the database server's backends (PostgreSQL) and of the whole
// machine at one moment.
type cpuSample struct {
	at      time.Time
	server  time.Duration
	bench   time.Duration
	db      map[int]time.Duration // per backend process
	machine machineCPU
	// metrics are the server's own metrics (nil when unavailable).
	metrics map[string]float64
}

// sampleCPU reads the CPU counters. dbPIDs lists the database backends
// serving the server (nil for SQLite, which runs inside the server). Errors
// leave a counter at zero; /proc is always there on Linux, which is the only
// platform this tool supports.
func sampleCPU(serverPID int, dbPIDs func() []int) cpuSample {
	s := cpuSample{at: time.Now()}
	s.server, _ = processCPU(serverPID)
	s.bench, _ = processCPU(0)
	if dbPIDs != nil {
		s.db = map[int]time.Duration{}
		for _, pid := range dbPIDs() {
			if c, err := processCPU(pid); err == nil {
				s.db[pid] = c
			}
		}
	}
	s.machine, _ = readMachineCPU()
	return s
}

// cpuUse is the CPU used between two samples.
type cpuUse struct {
	wall, server, bench time.Duration
	// db is the CPU of the database backends serving the server; hasDB says
	// whether it was measured.
	db    time.Duration
	hasDB bool
	// machineBusy and machineTotal are the busy and the total CPU time of
	// all cores of the machine.
	machineBusy, machineTotal time.Duration
	// metrics are the increments of the server's metrics (nil when the
	// server exposes none).
	metrics map[string]float64
}

func cpuBetween(a, b cpuSample) cpuUse {
	u := cpuUse{
		wall:         b.at.Sub(a.at),
		server:       b.server - a.server,
		bench:        b.bench - a.bench,
		machineBusy:  b.machine.busy - a.machine.busy,
		machineTotal: b.machine.total - a.machine.total,
		hasDB:        b.db != nil,
	}
	// A backend that connected during the interval counts whole; one that
	// disconnected is lost (pgxpool keeps its connections).
	for pid, c := range b.db {
		u.db += c - a.db[pid]
	}
	if a.metrics != nil && b.metrics != nil {
		u.metrics = map[string]float64{}
		for k, v := range b.metrics {
			u.metrics[k] = v - a.metrics[k]
		}
	}
	return u
}
