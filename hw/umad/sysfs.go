package umad

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Config says where the kernel's files are. The zero value means the real
// system; tests point the roots at a fake tree.
type Config struct {
	SysfsRoot string // default "/sys"
	DevRoot   string // default "/dev/infiniband"
}

func (c Config) sysfs() string {
	if c.SysfsRoot == "" {
		return "/sys"
	}
	return c.SysfsRoot
}

func (c Config) devRoot() string {
	if c.DevRoot == "" {
		return "/dev/infiniband"
	}
	return c.DevRoot
}

// kernelCMLoaded reports whether the kernel CM, ib_cm, is loaded: sysfs
// lists a loaded module under /sys/module.
func (c Config) kernelCMLoaded() bool {
	_, err := os.Stat(filepath.Join(c.sysfs(), "module", "ib_cm"))
	return err == nil
}

// GID is one entry of a port's GID table.
type GID struct {
	Index int
	GID   [16]byte
	Type  string // gid_attrs/types: "IB/RoCE v1", "RoCE v2"; empty for IB
}

// IP returns the GID as an IPv6 (or IPv4-mapped IPv6) address.
func (g GID) IP() netip.Addr { return netip.AddrFrom16(g.GID) }

// Port describes one umad device and the RDMA port behind it.
type Port struct {
	UMAD      int    // N of /dev/infiniband/umadN
	Device    string // RDMA device name (ibdev), e.g. "mlx5_0", "rxe0"
	Port      int    // port number on that device, from 1
	State     string // "ACTIVE", "DOWN", ...
	StateNum  int    // 4 for ACTIVE
	LinkLayer string // "InfiniBand" or "Ethernet"
	LID       uint16
	SMLID     uint16
	NodeGUID  uint64 // the device's node GUID (the CM's local CA GUID)
	GIDs      []GID  // valid (non-zero) GID table entries
	PKeys     []uint16
	DevPath   string // path of the umad character device
}

// Active reports whether the port is ACTIVE.
func (p Port) Active() bool { return p.StateNum == 4 }

// RoCE reports whether the port is an Ethernet (RoCE) port, which needs a
// GRH on every MAD.
func (p Port) RoCE() bool { return p.LinkLayer == "Ethernet" }

// DefaultGIDIndex picks the GID index a CM should source from: on RoCE the
// first RoCE v2 GID that is an IPv4-mapped address, else the first RoCE v2
// GID, else index 0.
func (p Port) DefaultGIDIndex() int {
	if !p.RoCE() {
		return 0
	}
	first := -1
	for _, g := range p.GIDs {
		if g.Type != "RoCE v2" {
			continue
		}
		if g.IP().Is4In6() {
			return g.Index
		}
		if first < 0 {
			first = g.Index
		}
	}
	if first >= 0 {
		return first
	}
	return 0
}

// GIDAt returns the GID table entry with the given index.
func (p Port) GIDAt(index int) (GID, bool) {
	for _, g := range p.GIDs {
		if g.Index == index {
			return g, true
		}
	}
	return GID{}, false
}

// Ports lists every umad port the kernel exposes, ordered by umad number.
// It fails with ErrNoDevice when /sys/class/infiniband_mad does not exist.
func (c Config) Ports() ([]Port, error) {
	base := filepath.Join(c.sysfs(), "class", "infiniband_mad")
	ents, err := os.ReadDir(base)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist", ErrNoDevice, base)
		}
		return nil, fmt.Errorf("umad: %w", err)
	}
	if v, err := readString(filepath.Join(base, "abi_version")); err == nil {
		if n, _ := strconv.Atoi(v); n != ABIVersion {
			return nil, fmt.Errorf("%w: kernel user_mad ABI %s, want %d", ErrABI, v, ABIVersion)
		}
	}
	var ports []Port
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "umad") {
			continue // abi_version, issmN
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, "umad"))
		if err != nil {
			continue
		}
		p, err := c.port(n)
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].UMAD < ports[j].UMAD })
	return ports, nil
}

// FindPort returns the umad port of the named device and port. An empty
// device name and port 0 select the first ACTIVE port.
func (c Config) FindPort(device string, port int) (Port, error) {
	ports, err := c.Ports()
	if err != nil {
		return Port{}, err
	}
	for _, p := range ports {
		if device == "" && port == 0 {
			if p.Active() {
				return p, nil
			}
			continue
		}
		if (device == "" || p.Device == device) && (port == 0 || p.Port == port) {
			return p, nil
		}
	}
	if device == "" && port == 0 {
		return Port{}, fmt.Errorf("%w: no ACTIVE port among %d umad devices", ErrNoPort, len(ports))
	}
	return Port{}, fmt.Errorf("%w: device %q port %d", ErrNoPort, device, port)
}

func (c Config) port(n int) (Port, error) {
	dir := filepath.Join(c.sysfs(), "class", "infiniband_mad", fmt.Sprintf("umad%d", n))
	p := Port{UMAD: n, DevPath: filepath.Join(c.devRoot(), fmt.Sprintf("umad%d", n))}
	var err error
	if p.Device, err = readString(filepath.Join(dir, "ibdev")); err != nil {
		return p, fmt.Errorf("umad: %w", err)
	}
	ps, err := readString(filepath.Join(dir, "port"))
	if err != nil {
		return p, fmt.Errorf("umad: %w", err)
	}
	if p.Port, err = strconv.Atoi(ps); err != nil {
		return p, fmt.Errorf("umad: %s/port: %w", dir, err)
	}
	ib := filepath.Join(c.sysfs(), "class", "infiniband", p.Device)
	if s, err := readString(filepath.Join(ib, "node_guid")); err == nil {
		p.NodeGUID, _ = parseGUID(s)
	}
	pd := filepath.Join(ib, "ports", strconv.Itoa(p.Port))
	if s, err := readString(filepath.Join(pd, "state")); err == nil {
		// "4: ACTIVE"
		num, name, _ := strings.Cut(s, ":")
		p.StateNum, _ = strconv.Atoi(strings.TrimSpace(num))
		p.State = strings.TrimSpace(name)
	}
	p.LinkLayer, _ = readString(filepath.Join(pd, "link_layer"))
	if s, err := readString(filepath.Join(pd, "lid")); err == nil {
		v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
		p.LID = uint16(v)
	}
	if s, err := readString(filepath.Join(pd, "sm_lid")); err == nil {
		v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
		p.SMLID = uint16(v)
	}
	for _, i := range indexFiles(filepath.Join(pd, "gids")) {
		s, err := readString(filepath.Join(pd, "gids", strconv.Itoa(i)))
		if err != nil {
			continue
		}
		g, err := parseGID(s)
		if err != nil || g == ([16]byte{}) {
			continue
		}
		// Reading the type of an unused entry fails (EINVAL); skip it.
		t, _ := readString(filepath.Join(pd, "gid_attrs", "types", strconv.Itoa(i)))
		p.GIDs = append(p.GIDs, GID{Index: i, GID: g, Type: t})
	}
	for _, i := range indexFiles(filepath.Join(pd, "pkeys")) {
		s, err := readString(filepath.Join(pd, "pkeys", strconv.Itoa(i)))
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
		if err != nil {
			continue
		}
		for len(p.PKeys) < i {
			p.PKeys = append(p.PKeys, 0)
		}
		p.PKeys = append(p.PKeys, uint16(v))
	}
	return p, nil
}

// indexFiles lists the numeric file names in dir, sorted.
func indexFiles(dir string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var idx []int
	for _, e := range ents {
		if i, err := strconv.Atoi(e.Name()); err == nil {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	return idx
}

// readString reads a small sysfs attribute. A port's GID table alone is
// 128 to 1024 files (Soft-RoCE has 1024), so readSmallFile reads each with
// as few system calls as it can.
func readString(path string) (string, error) {
	b, err := readSmallFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// parseGID parses sysfs's "fe80:0000:0000:0000:5054:00ff:fe12:3456".
func parseGID(s string) ([16]byte, error) {
	var g [16]byte
	h := strings.ReplaceAll(s, ":", "")
	if len(h) != 32 {
		return g, fmt.Errorf("umad: bad GID %q", s)
	}
	if _, err := hex.Decode(g[:], []byte(h)); err != nil {
		return g, fmt.Errorf("umad: bad GID %q: %w", s, err)
	}
	return g, nil
}

// parseGUID parses sysfs's "5054:00ff:fe12:3456".
func parseGUID(s string) (uint64, error) {
	h := strings.ReplaceAll(s, ":", "")
	var b [8]byte
	if len(h) != 16 {
		return 0, fmt.Errorf("umad: bad GUID %q", s)
	}
	if _, err := hex.Decode(b[:], []byte(h)); err != nil {
		return 0, fmt.Errorf("umad: bad GUID %q: %w", s, err)
	}
	return binary.BigEndian.Uint64(b[:]), nil
}
