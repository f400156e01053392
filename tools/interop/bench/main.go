// Command bench is make interop-bench: ibcm against the Linux kernel CM,
// side by side, in the two VMs of make interop (the same staging tree,
// images, VM sizes, QEMU flags and kernel for both sides, from
// tools/interop's host.go). rdma-core's cmtime times the CM steps:
//
//	passive  cmtime -s B -c N in VM A (kernel CM) against, in VM B,
//	         (a) ibcm listen --count N (ib_cm and rdma_cm unloaded) and
//	         (b) the kernel's own passive CM: cmtime -b B -c N (loaded);
//	active   cmtime -b A -c N in VM A against, in VM B, (a) ibcm cmtime -c N
//	         and (b) the kernel's client, cmtime -s A -c N;
//	storm    the passive role once with N = IBCM_BENCH_STORM_N (10,000).
//
// Runs alternate ibcm, kernel, ibcm, ... (VM B switches the kernel CM with
// rmmod/insmod before each run; bench-b.sh runs the plan, bench-a.sh what
// VM B asks). ibcm listen writes its event lines to the VM's serial
// console, as a user at that terminal would see them; with the output
// "file" (IBCM_BENCH_OUTPUTS) also to a file in the VM's RAM, to show what
// the console costs. tools/interop/benchreport writes
// docs/interop-bench.md from the logs.
//
// Environment:
//
//	IBCM_BENCH_N            connection counts (default "100 1000")
//	IBCM_BENCH_RUNS         runs of each side per count and role (default 6, the
//	                        fewest for which benchstat gives a confidence interval)
//	IBCM_BENCH_ROLES        any of "passive active storm" (default all three)
//	IBCM_BENCH_OUTPUTS      ibcm's variants in the passive role, each a run
//	                        of its own per round: qp (a real RC QP per
//	                        connection, --data qp, the figure that counts:
//	                        the kernel's cmtime -b makes one too), console
//	                        (no QP), file or null (no QP, the output to a
//	                        file or nowhere) (default "qp console")
//	IBCM_BENCH_ACTIVE_OUTPUTS ibcm cmtime's variants in the active role: qp
//	                        (--verbs-qp) or console (default "qp console")
//	IBCM_BENCH_STORM_N      the storm's connections (default 10000)
//	IBCM_BENCH_STORM_OUTPUTS ibcm listen's variants in the storm (default "qp")
//	IBCM_BENCH_PROFILE=1    run ibcm under pprof (CPU, heap, block, mutex
//	                        profiles, copied out to $WORK/prof/); the
//	                        timings of such runs are not the plain ones
//	IBCM_BENCH_PROF_FLAGS   with IBCM_BENCH_PROFILE=1, the profile flags
//	                        (default: all of them; see bench-b.sh)
//	IBCM_BENCH_CALIBRATE    kernel-CM unload/load cycles timed first (default 3)
//	IBCM_BENCH_WIRE         the VMs' wire: tcp, lossless (default), or udp
//	                        (Config.Wire says why)
//	IBCM_BENCH_LISTEN_ARGS, IBCM_BENCH_CMTIME_ARGS  extra flags of every ibcm
//	                        listen and ibcm cmtime run
//	IBCM_BENCH_DOC          report path (default docs/interop-bench.md; "-": none)
//	IBCM_INTEROP_CACHE, IBCM_INTEROP_WORK, IBCM_INTEROP_CPU: as make interop
//	IBCM_INTEROP_TIMEOUT    seconds the VMs may run (default: from the plan)
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ibcm/ibcm/tools/interop"
)

const (
	aIP       = "10.0.0.1"
	bIP       = "10.0.0.2"
	tcpPort   = "7471" // cmtime's default
	ctlPort   = "5000"
	replyPort = "5001"
)

func env(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, "interop-bench: "+format+"\n", a...) }

func fail(format string, a ...any) {
	logf("FAIL: "+format, a...)
	os.Exit(1)
}

func main() {
	root, err := os.Getwd()
	if err != nil {
		fail("%v", err)
	}
	if os.Getenv("IBCM_INTEROP_WORK") == "" {
		d, err := os.MkdirTemp("", "ibcm-bench.")
		if err != nil {
			fail("%v", err)
		}
		os.Setenv("IBCM_INTEROP_WORK", d)
	}
	c, err := interop.ConfigFromEnv(root)
	if err != nil {
		fail("%v", err)
	}
	c.Logf = logf
	c.Wire = env("IBCM_BENCH_WIRE", "tcp")
	plan, p := benchPlan()
	if os.Getenv("IBCM_INTEROP_TIMEOUT") == "" {
		c.Timeout = timeBound(p)
	}
	doc := env("IBCM_BENCH_DOC", "docs/interop-bench.md")

	t0 := time.Now()
	st, err := interop.StageDebian(c)
	if err != nil {
		fail("%v", err)
	}
	t1 := time.Now()
	logf("building ibcm (cgo: hw/verbs, for its QPs) and mkinitramfs")
	if err := interop.Build(c); err != nil {
		fail("%v", err)
	}
	makeImages(c, st, root, plan)
	t2 := time.Now()

	pa, pb, unlock, err := interop.LockPorts()
	if err != nil {
		fail("%v", err)
	}
	defer unlock()
	drops0 := interop.UDPDrops()
	logf("booting VM A (kernel CM, cmtime) and VM B (ibcm or the kernel CM) on %s 127.0.0.1:%d<->%d, at most %v; logs in %s",
		c.Wire, pa, pb, c.Timeout, c.Work)
	done := make(chan struct{})
	go sampleLoad(filepath.Join(c.Work, "host-load.log"), done)
	go bootTime(c.Work, time.Now(), done)
	var va, vb interop.VM
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); va = interop.Boot(c, st, "a", pa, pb, "52:54:00:12:34:01") }()
	go func() { defer wg.Done(); vb = interop.Boot(c, st, "b", pb, pa, "52:54:00:12:34:02") }()
	wg.Wait()
	close(done)
	drops1 := interop.UDPDrops()
	t3 := time.Now()

	if err := logs(c.Work); err != nil {
		fail("%v", err)
	}
	fails := unfinished(c, va, vb)
	if err := meta(c, st, p, t3.Sub(t2), drops1-drops0); err != nil {
		fail("%v", err)
	}
	if !writeReport(root, c.Work, doc) {
		fails++
	}
	logf("times: packages %.0fs, build %.0fs, VMs %.0fs, total %.0fs", t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(),
		t3.Sub(t2).Seconds(), time.Since(t0).Seconds())
	if fails > 0 {
		printTails(c.Work)
		fail("interop-bench failed (logs in %s)", c.Work)
	}
	logf("PASS (logs in %s)", c.Work)
}

// benchPlan is what VM B's bench-b.sh runs, from the IBCM_BENCH_*
// variables: as pairs for VM B's environment, and as a map.
func benchPlan() ([][2]string, map[string]string) {
	plan := [][2]string{
		{"BENCH_N", env("IBCM_BENCH_N", "100 1000")},
		{"BENCH_RUNS", env("IBCM_BENCH_RUNS", "6")},
		{"BENCH_ROLES", env("IBCM_BENCH_ROLES", "passive active storm")},
		{"BENCH_OUTPUTS", env("IBCM_BENCH_OUTPUTS", "qp console")},
		{"BENCH_ACTIVE_OUTPUTS", env("IBCM_BENCH_ACTIVE_OUTPUTS", "qp console")},
		{"BENCH_STORM_N", env("IBCM_BENCH_STORM_N", "10000")},
		{"BENCH_STORM_OUTPUTS", env("IBCM_BENCH_STORM_OUTPUTS", "qp")},
		{"BENCH_PROFILE", env("IBCM_BENCH_PROFILE", "0")},
		{"BENCH_CALIBRATE", env("IBCM_BENCH_CALIBRATE", "3")},
		{"IBCM_LISTEN_ARGS", env("IBCM_BENCH_LISTEN_ARGS", "")},
		{"IBCM_CMTIME_ARGS", env("IBCM_BENCH_CMTIME_ARGS", "")},
	}
	if f := os.Getenv("IBCM_BENCH_PROF_FLAGS"); f != "" {
		plan = append(plan, [2]string{"BENCH_PROF_FLAGS", f})
	}
	p := map[string]string{}
	for _, kv := range plan {
		p[kv[0]] = kv[1]
	}
	return plan, p
}

// makeImages makes the two VMs' initramfs images, VM A's running
// bench-a.sh, VM B's bench-b.sh with ibcm and the plan.
func makeImages(c *interop.Config, st interop.Stage, root string, plan [][2]string) {
	// Both images have the kernel CM and cmtime; init.sh loads every
	// module, and VM B unloads the kernel CM for ibcm's runs.
	src := func(dst, f string) string { return dst + "=" + filepath.Join(root, "tools/interop", f) }
	elf := []string{"/usr/bin/rdma", "/usr/bin/cmtime", "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "/lib/x86_64-linux-gnu/libgcc_s.so.1"}
	files := []string{"/etc/libibverbs.d/rxe.driver=" + filepath.Join(st.Dir, "etc/libibverbs.d/rxe.driver"),
		src("/init", "init.sh:0755"), src("/lib/guest.sh", "guest.sh"), "/bin/busybox=/bin/busybox:0755"}
	mods := []string{"virtio_pci", "virtio_net", "crc32_generic", "rdma_rxe", "ib_umad", "rdma_ucm"}
	ports := [][2]string{{"TCP_PORT", tcpPort}, {"CTL_PORT", ctlPort}, {"REPLY_PORT", replyPort}}
	a := &interop.Image{Name: "a", ELF: elf, KMod: mods, Files: append(files, src("/test.sh", "bench-a.sh")),
		Env: append([][2]string{{"ROLE", "A"}, {"IP", aIP}, {"PEER", bIP}, {"WAIT_SIGNAL", fmt.Sprint(int(c.Timeout.Seconds()))}}, ports...)}
	b := &interop.Image{Name: "b", ELF: elf, KMod: mods, Files: append(files, src("/test.sh", "bench-b.sh")),
		Host: []string{"/bin/ibcm=" + filepath.Join(c.Work, "cgo", "ibcm") + ":0755"},
		Env:  append(append([][2]string{{"ROLE", "B"}, {"IP", bIP}, {"PEER", aIP}}, ports...), plan...)}
	for _, im := range []*interop.Image{a, b} {
		if err := im.Make(c, st); err != nil {
			fail("mkinitramfs (VM %s): %v", im.Name, err)
		}
	}
}

// unfinished logs each VM that did not finish its part, and counts them.
func unfinished(c *interop.Config, va, vb interop.VM) int {
	fails := 0
	if !contains(filepath.Join(c.Work, "b.log"), `"msg":"bench-done"`) {
		logf("VM B did not finish (%v, timed out: %v; VM timeout %v)", vb.Err, vb.TimedOut, c.Timeout)
		fails++
	}
	if !contains(filepath.Join(c.Work, "a.log"), `"msg":"bench-loop-done"`) {
		logf("VM A did not finish (%v, timed out: %v)", va.Err, va.TimedOut)
		fails++
	}
	return fails
}

// writeReport runs tools/interop/benchreport on the logs into doc ("-": stdout);
// it reports whether benchreport succeeded.
func writeReport(root, work, doc string) bool {
	out := doc
	if doc == "-" {
		out = "-"
	}
	cmd := exec.Command("go", "run", "./tools/interop/benchreport", "-work", work, "-o", out)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return false
	}
	if doc != "-" {
		logf("wrote %s", doc)
	}
	return true
}

// printTails prints the end of each VM's log.
func printTails(work string) {
	for _, f := range []struct {
		name string
		n    int
	}{{"a.log", 50}, {"b.log", 80}} {
		fmt.Fprintf(os.Stderr, "==================== %s (tail) ====================\n%s", f.name, tail(filepath.Join(work, f.name), f.n))
	}
}

// timeBound is the plan's time: a generous allowance per run, storm
// included, and 300 s besides.
func timeBound(p map[string]string) time.Duration {
	roles := " " + p["BENCH_ROLES"] + " "
	runs, _ := strconv.Atoi(p["BENCH_RUNS"])
	words := func(k string) int { return len(strings.Fields(p[k])) }
	total := 300
	for _, s := range strings.Fields(p["BENCH_N"]) {
		n, _ := strconv.Atoi(s)
		if strings.Contains(roles, " passive ") {
			total += runs * (words("BENCH_OUTPUTS") + 1) * (30 + n/20)
		}
		if strings.Contains(roles, " active ") {
			total += runs * (words("BENCH_ACTIVE_OUTPUTS") + 1) * (30 + n/20)
		}
	}
	if strings.Contains(roles, " storm ") {
		n, _ := strconv.Atoi(p["BENCH_STORM_N"])
		total += (words("BENCH_STORM_OUTPUTS") + 1) * (120 + n/10)
	}
	return time.Duration(total) * time.Second
}

// sampleLoad writes the host's load average every 5 s while the VMs run.
func sampleLoad(path string, done <-chan struct{}) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if b, err := os.ReadFile("/proc/loadavg"); err == nil {
			fmt.Fprintf(f, "%d %s\n", time.Now().Unix(), strings.Join(strings.Fields(string(b))[:3], " "))
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// bootTime writes, once VM B's bench starts, when that was and when the
// VMs were started (the boot's cost, for the reboot-per-run alternative).
func bootTime(work string, start time.Time, done <-chan struct{}) {
	for {
		if contains(filepath.Join(work, "b.console"), `"msg":"bench-start"`) {
			unix := func(t time.Time) string { return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64) }
			_ = os.WriteFile(filepath.Join(work, "boot.time"), []byte(unix(time.Now())+" "+unix(start)+"\n"), 0o644)
			return
		}
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func contains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// logs writes what benchreport reads: both consoles without carriage
// returns (a.log, b.log), VM A's cmtime output (a-cmtime.log, its ttyS1),
// and the profiles VM B copied out as base64 on its ttyS2 (prof/).
func logs(work string) error {
	for _, f := range [][2]string{{"a.console", "a.log"}, {"b.console", "b.log"}, {"a-ttyS1.log", "a-cmtime.log"}} {
		b, _ := os.ReadFile(filepath.Join(work, f[0]))
		if err := os.WriteFile(filepath.Join(work, f[1]), []byte(strings.ReplaceAll(string(b), "\r", "")), 0o644); err != nil {
			return err
		}
	}
	prof := filepath.Join(work, "prof")
	if err := os.MkdirAll(prof, 0o755); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(work, "b-ttyS2.log"))
	if err != nil {
		return nil // no profiles
	}
	defer f.Close()
	con, err := interop.ParseConsole(f)
	if err != nil {
		return err
	}
	for _, name := range con.Order {
		b, err := con.Logs[name].Bytes()
		if err != nil {
			return fmt.Errorf("profile %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(prof, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// meta writes meta.env: the machine, the versions and the plan.
func meta(c *interop.Config, st interop.Stage, p map[string]string, vms time.Duration, drops int) error {
	run := func(name string, args ...string) string {
		out, _ := exec.Command(name, args...).Output()
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	commit := run("git", "-C", c.Root, "rev-parse", "--short", "HEAD")
	if commit == "" {
		commit = "unknown"
	}
	if exec.Command("git", "-C", c.Root, "diff", "--quiet").Run() != nil {
		commit += " (with local changes)"
	}
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	rdmaCore := ""
	if des, err := os.ReadDir(filepath.Join(c.Cache, "debs")); err == nil {
		for _, d := range des {
			if v, ok := strings.CutPrefix(d.Name(), "rdmacm-utils_"); ok {
				rdmaCore = strings.TrimSuffix(v, "_amd64.deb")
				break
			}
		}
	}
	var b strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }
	kv("date", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	kv("commit", commit)
	kv("cpu", cpu)
	kv("cores", strconv.Itoa(runtime.NumCPU()))
	kv("host_kernel", run("uname", "-r"))
	kv("qemu", run("qemu-system-x86_64", "--version"))
	kv("qemu_flags", fmt.Sprintf("-accel tcg -M pc -cpu %s -m 768 -smp 1, virtio-net on a %s socket netdev", c.CPU, strings.ToUpper(c.Wire)))
	kv("wire", c.Wire)
	kv("udp_drops", strconv.Itoa(drops))
	kv("guest_kernel", st.KVer)
	kv("rdma_core", rdmaCore)
	kv("go", strings.TrimPrefix(run("go", "version"), "go version "))
	kv("variants", fmt.Sprintf("passive: %s; active: %s; storm: %s", p["BENCH_OUTPUTS"], p["BENCH_ACTIVE_OUTPUTS"], p["BENCH_STORM_OUTPUTS"]))
	kv("profile", p["BENCH_PROFILE"])
	kv("vm_seconds", strconv.Itoa(int(vms.Seconds())))
	if bt, err := os.ReadFile(filepath.Join(c.Work, "boot.time")); err == nil {
		if f := strings.Fields(string(bt)); len(f) == 2 {
			x, _ := strconv.ParseFloat(f[0], 64)
			y, _ := strconv.ParseFloat(f[1], 64)
			kv("boot_seconds", strconv.FormatFloat(x-y, 'f', 2, 64))
		}
	}
	return os.WriteFile(filepath.Join(c.Work, "meta.env"), []byte(b.String()), 0o644)
}
