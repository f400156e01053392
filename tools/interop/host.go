package interop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config is one run's setting, from the environment (README.md):
// IBCM_INTEROP_CACHE, IBCM_INTEROP_WORK, IBCM_INTEROP_TIMEOUT,
// IBCM_INTEROP_CPU and IBCM_INTEROP_ONLY.
type Config struct {
	Root    string // the repository
	Cache   string // Debian packages and staging trees, kept across runs
	Work    string // this run's binaries, images and logs
	Timeout time.Duration
	CPU     string // QEMU's -cpu
	// Only is the phases of VM B's script that run (vm-b.sh's phase:
	// verbs, cm, data, daemon, rdmacm, probe; comma-separated), all of them
	// when empty: a shorter boot for work on some of the checks, whose
	// subtests are then the ones to select (go test -run).
	Only string
	// Wire is the VMs' link: "udp", a datagram socket each, or "tcp", one
	// stream socket that VM a listens on and VM b connects to. A UDP
	// socket drops frames when its receive buffer is full, as a burst to a
	// VM that drains slowly can fill it (the host's Udp RcvbufErrors count
	// them); a stream applies back-pressure instead and loses nothing, as
	// an InfiniBand link (credit-based flow control) or RoCE with PFC does.
	Wire string
	Logf func(format string, a ...any)
}

// ConfigFromEnv reads the environment; root is the repository.
func ConfigFromEnv(root string) (*Config, error) {
	c := &Config{Root: root, Timeout: 300 * time.Second, CPU: "qemu64", Wire: "udp", Logf: func(string, ...any) {}}
	c.Cache = os.Getenv("IBCM_INTEROP_CACHE")
	if c.Cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, err
			}
			base = filepath.Join(home, ".cache")
		}
		c.Cache = filepath.Join(base, "ibcm", "interop")
	}
	c.Work = os.Getenv("IBCM_INTEROP_WORK")
	if c.Work == "" {
		d, err := os.MkdirTemp("", "ibcm-interop.")
		if err != nil {
			return nil, err
		}
		c.Work = d
	}
	if s := os.Getenv("IBCM_INTEROP_TIMEOUT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("IBCM_INTEROP_TIMEOUT=%q: %w", s, err)
		}
		c.Timeout = time.Duration(n) * time.Second
	}
	if s := os.Getenv("IBCM_INTEROP_CPU"); s != "" {
		c.CPU = s
	}
	c.Only = os.Getenv("IBCM_INTEROP_ONLY")
	for _, d := range []string{filepath.Join(c.Cache, "debs"), c.Work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Packages every VM image is built from, besides the kernel's.
var stagePackages = []string{"rdmacm-utils", "ibverbs-providers", "libibverbs1", "librdmacm1", "iproute2", "libc6",
	"libgcc-s1", "libnl-3-200", "libnl-route-3-200", "libmnl0", "libbsd0", "libcap2", "libmd0"}

// Stage is an unpacked tree of Debian packages (dpkg -x) the images are
// made from.
type Stage struct {
	Dir  string
	KVer string // the kernel's version (under Dir/lib/modules)
}

// Kernel is the kernel image's path.
func (s Stage) Kernel() string { return filepath.Join(s.Dir, "boot", "vmlinuz-"+s.KVer) }

func output(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func aptUpdate(c *Config) {
	c.Logf("apt-get update")
	// A failed update leaves the lists as they were; the step that needed
	// it fails with its own error.
	_, _ = output("", "apt-get", "update", "-qq")
}

// kernelPackage is the versioned package linux-image-amd64 depends on.
func kernelPackage() string {
	out, _ := output("", "apt-cache", "depends", "linux-image-amd64")
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") &&
			len(f[1]) > len("linux-image-") && f[1][len("linux-image-")] >= '0' && f[1][len("linux-image-")] <= '9' {
			return f[1]
		}
	}
	return ""
}

// StageDebian resolves the kernel and the packages with apt, downloads the
// .debs missing from the cache (keyed by their file names, so by version)
// and unpacks them once into a staging tree named by the set.
func StageDebian(c *Config) (Stage, error) {
	kpkg := kernelPackage()
	if kpkg == "" {
		aptUpdate(c)
		if kpkg = kernelPackage(); kpkg == "" {
			return Stage{}, errors.New("cannot resolve linux-image-amd64 (apt-get update needed?)")
		}
	}
	pkgs := append([]string{kpkg}, stagePackages...)
	files, err := debFiles(pkgs)
	if err != nil {
		return Stage{}, err
	}
	debs := filepath.Join(c.Cache, "debs")
	var missing []string
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(debs, f)); err != nil || st.Size() == 0 {
			missing = append(missing, f[:strings.Index(f, "_")])
		}
	}
	if len(missing) > 0 {
		c.Logf("downloading %d packages", len(missing))
		if _, err := output(debs, "apt-get", append([]string{"download"}, missing...)...); err != nil {
			// Stale package lists name versions the archive no longer has.
			c.Logf("%v; apt-get update and retry", err)
			aptUpdate(c)
			if files, err = debFiles(pkgs); err != nil {
				return Stage{}, err
			}
			if _, err := output(debs, "apt-get", append([]string{"download"}, missing...)...); err != nil {
				return Stage{}, err
			}
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(files, "\n") + "\n"))
	st := Stage{Dir: filepath.Join(c.Cache, "stage-"+hex.EncodeToString(sum[:])[:16]), KVer: strings.TrimPrefix(kpkg, "linux-image-")}
	if _, err := os.Stat(filepath.Join(st.Dir, ".complete")); err != nil {
		c.Logf("unpacking into %s", st.Dir)
		// Several harnesses (and engineers) may share the cache: unpack
		// into a private directory and move it in place; a stage another
		// run finished first wins. Each package set keeps its own, so a
		// stage is never deleted while in use.
		tmp, err := os.MkdirTemp(c.Cache, filepath.Base(st.Dir)+".tmp.")
		if err != nil {
			return Stage{}, err
		}
		for _, f := range files {
			if _, err := output("", "dpkg", "-x", filepath.Join(debs, f), tmp); err != nil {
				return Stage{}, err
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
			return Stage{}, err
		}
		if err := os.Rename(tmp, st.Dir); err != nil {
			_ = os.RemoveAll(tmp)
		}
	}
	if _, err := os.Stat(st.Kernel()); err != nil {
		return Stage{}, fmt.Errorf("no kernel in %s: %w", st.Dir, err)
	}
	return st, nil
}

// debFiles is the sorted file names of pkgs' .debs (with their versions).
func debFiles(pkgs []string) ([]string, error) {
	out, err := output("", "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			files = append(files, f[1])
		}
	}
	if len(files) < len(pkgs) {
		return nil, fmt.Errorf("could not resolve all packages: %q", out)
	}
	sort.Strings(files)
	return files, nil
}

// goBuild runs go build (or go test -c) in the repository with cgo on or
// off.
func goBuild(c *Config, cgo bool, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+map[bool]string{true: "1", false: "0"}[cgo])
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Build writes the programs the images hold into Work: static (VM A's
// ibcm, VM B's ibcmd, the Get probe, mkinitramfs) and cgo, against Debian's
// libibverbs-dev (VM B's ibcm, whose --data drives real QPs through
// hw/verbs; examples/rdmaclient; hw/verbs' device tests), whose libraries
// mkinitramfs -hostelf takes from the stage; and rdmacm's librdmacm.so.1
// (VM B's rdma_cm programs run through it), into Work/rdmacm.
func Build(c *Config) error {
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		return errors.New("no /usr/include/infiniband/verbs.h (tools/deps.sh installs libibverbs-dev)")
	}
	static, cgo := filepath.Join(c.Work, "static")+"/", filepath.Join(c.Work, "cgo")+"/"
	steps := []struct {
		cgo  bool
		args []string
	}{
		{false, []string{"build", "-trimpath", "-o", static, "./cmd/ibcm", "./cmd/ibcmd", "./tools/interop/probe", "./tools/interop/mkinitramfs"}},
		{true, []string{"build", "-trimpath", "-ldflags=-s", "-o", cgo, "./cmd/ibcm", "./examples/rdmaclient"}},
		{true, []string{"test", "-c", "-tags", "rxe", "-trimpath", "-ldflags=-s", "-o", cgo + "verbs.test", "./hw/verbs"}},
	}
	for _, s := range steps {
		if err := goBuild(c, s.cgo, s.args...); err != nil {
			return err
		}
	}
	lib := filepath.Join(c.Work, "rdmacm")
	cmd := exec.Command("make", "-C", filepath.Join(c.Root, "rdmacm"), "OUT="+lib, filepath.Join(lib, "librdmacm.so.1"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make -C rdmacm: %w\n%s", err, out)
	}
	return nil
}

// Image is one VM's initramfs: what mkinitramfs puts in it.
type Image struct {
	Name  string   // a or b: the file Work/NAME.cpio.gz
	ELF   []string // programs of the stage, with their libraries
	KMod  []string // modules, with their dependencies
	Files []string // DST=HOSTSRC[:MODE]
	Host  []string // DST=HOSTSRC[:MODE] cgo programs, their libraries from the stage
	Env   [][2]string
}

// Make writes the image with mkinitramfs (built by Build).
func (im *Image) Make(c *Config, st Stage) error {
	var env strings.Builder
	for _, kv := range im.Env {
		fmt.Fprintf(&env, "%s=%s\n", kv[0], strconv.Quote(kv[1]))
	}
	envFile := filepath.Join(c.Work, im.Name+".env")
	if err := os.WriteFile(envFile, []byte(env.String()), 0o644); err != nil {
		return err
	}
	args := []string{"-o", filepath.Join(c.Work, im.Name+".cpio.gz"), "-stage", st.Dir, "-kver", st.KVer,
		"-elf", strings.Join(im.ELF, ","), "-kmod", strings.Join(im.KMod, ","), "-file", "/etc/ibcm.env=" + envFile}
	for _, f := range im.Files {
		args = append(args, "-file", f)
	}
	for _, f := range im.Host {
		args = append(args, "-hostelf", f)
	}
	_, err := output(c.Root, filepath.Join(c.Work, "static", "mkinitramfs"), args...)
	return err
}

// LockPorts takes a pair of UDP ports on 127.0.0.1 that no other run on
// this machine holds (a lock directory per pair: mkdir is atomic) and
// returns them with the function that gives them back. QEMU's socket
// netdev binds with SO_REUSEADDR, so two runs on one pair would silently
// exchange each other's frames.
func LockPorts() (int, int, func(), error) {
	dir := filepath.Join(os.TempDir(), "ibcm-interop-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, nil, err
	}
	for range 200 {
		pa := 20000 + 2*rand.IntN(10000)
		lock := filepath.Join(dir, strconv.Itoa(pa))
		if err := os.Mkdir(lock, 0o755); err == nil {
			if err := os.WriteFile(filepath.Join(lock, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
				return 0, 0, nil, err
			}
			return pa, pa + 1, func() { _ = os.RemoveAll(lock) }, nil
		}
		// A lock whose run is gone is free again.
		if b, err := os.ReadFile(filepath.Join(lock, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
				_ = os.RemoveAll(lock)
			}
		}
	}
	return 0, 0, nil, errors.New("no free UDP port pair for the VMs")
}

// VM is a finished VM: its console and serial ports' files, and how QEMU
// ended.
type VM struct {
	Name     string
	Err      error // QEMU's exit (nil: the guest powered off)
	TimedOut bool  // killed at Config.Timeout
}

// Boot runs VM name from Work/NAME.cpio.gz (1 vCPU, 768 MB, TCG), its
// console in Work/NAME.console and serial ports 1-5 in
// Work/NAME-ttySn.log (ports 4 and 5 on a PCI serial card), its eth0 on a
// socket netdev between 127.0.0.1:local and :remote (c.Wire; on tcp, VM a
// listens on local and VM b connects to remote); killed after c.Timeout.
func Boot(c *Config, st Stage, name string, local, remote int, mac string) VM {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	w := func(f string) string { return filepath.Join(c.Work, name+f) }
	net := fmt.Sprintf("socket,id=n0,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", remote, local)
	if c.Wire == "tcp" {
		net = fmt.Sprintf("socket,id=n0,listen=127.0.0.1:%d", local)
		if name != "a" {
			net = fmt.Sprintf("socket,id=n0,connect=127.0.0.1:%d", remote)
			if err := waitListen(remote, 30*time.Second); err != nil {
				return VM{Name: name, Err: err}
			}
		}
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-accel", "tcg", "-M", "pc", "-cpu", c.CPU, "-m", "768", "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", st.Kernel(), "-initrd", w(".cpio.gz"),
		"-append", "console=ttyS0 quiet panic=-1 8250.nr_uarts=6 ibcm.role="+name,
		"-netdev", net,
		"-serial", "file:"+w("-ttyS1.log"), "-serial", "file:"+w("-ttyS2.log"), "-serial", "file:"+w("-ttyS3.log"),
		"-chardev", "file,id=s4,path="+w("-ttyS4.log"), "-chardev", "file,id=s5,path="+w("-ttyS5.log"),
		"-device", "pci-serial-2x,chardev1=s4,chardev2=s5",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	out, err := os.Create(w(".console"))
	if err != nil {
		return VM{Name: name, Err: err}
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	return VM{Name: name, Err: err, TimedOut: ctx.Err() != nil}
}

// waitListen waits until a socket on 127.0.0.1 listens on TCP port (read
// from /proc/net/tcp: a probe connection would be taken for the peer by
// QEMU's one-connection listener).
func waitListen(port int, d time.Duration) error {
	want := fmt.Sprintf("0100007F:%04X 00000000:0000 0A", port)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			return err
		}
		if strings.Contains(string(b), want) {
			return nil
		}
	}
	return fmt.Errorf("nothing listens on 127.0.0.1:%d (VM a's wire)", port)
}

// UDPDrops is the host's count of UDP datagrams dropped for a full receive
// buffer (all sockets: read it before and after a run).
func UDPDrops() int {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 6 && f[0] == "Udp:" {
			if n++; n == 2 {
				v, _ := strconv.Atoi(f[5])
				return v
			}
		}
	}
	return 0
}
