// Command mkinitramfs writes a gzipped newc cpio archive (a Linux initramfs)
// for the interop VMs, with no host tool but Go: it copies ELF programs out
// of an unpacked Debian staging tree together with the shared libraries and
// the program interpreter they need, and kernel modules together with the
// modules they depend on, in load order.
//
//	mkinitramfs -o initrd.gz -stage DIR -kver 6.1.0-57-amd64 \
//	    -elf /usr/bin/rping -kmod rdma_rxe,ib_umad \
//	    -file /init=tools/interop/init.sh:0755 -file /bin/busybox=/bin/busybox:0755
//
// -elf and -tree paths are inside the staging tree; -file sources are host
// paths; -hostelf copies a program built on the host (cgo) and takes its
// interpreter and libraries from the staging tree. Modules land in /lib/modules/NAME.ko and their load order in
// /etc/modules.order (one path a line).
package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, strings.Split(s, ",")...); return nil }

var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib", "/lib"}

type archive struct {
	stage string
	files map[string]entry // archive path -> content
}

type entry struct {
	data []byte
	mode uint32
}

func main() {
	var (
		out                             = flag.String("o", "", "output file (gzipped cpio)")
		stage                           = flag.String("stage", "", "unpacked Debian packages (dpkg -x)")
		kver                            = flag.String("kver", "", "kernel version under stage/lib/modules")
		elfs, kmods, files, trees, dirs list
		hostELFs                        list
	)
	flag.Var(&elfs, "elf", "ELF file in the stage to copy with its libraries (repeatable, comma-separated)")
	flag.Var(&kmods, "kmod", "kernel module to copy with its dependencies (repeatable, comma-separated)")
	flag.Var(&files, "file", "DST=HOSTSRC[:MODE] host file to copy (repeatable)")
	flag.Var(&hostELFs, "hostelf", "DST=HOSTSRC[:MODE] program built on the host, with its libraries from the stage (repeatable)")
	flag.Var(&trees, "tree", "directory in the stage to copy as is (repeatable)")
	flag.Var(&dirs, "dir", "empty directory to create (repeatable)")
	flag.Parse()
	if *out == "" {
		fail(errors.New("-o is required"))
	}
	a := &archive{stage: *stage, files: map[string]entry{}}
	for _, d := range dirs {
		a.files[clean(d)] = entry{mode: 0o40755}
	}
	for _, f := range files {
		dst, src, mode, err := parseFileSpec(f, 0o644)
		if err != nil {
			fail(fmt.Errorf("-file %w", err))
		}
		b, err := os.ReadFile(src)
		if err != nil {
			fail(err)
		}
		a.files[clean(dst)] = entry{data: b, mode: 0o100000 | uint32(mode)}
	}
	for _, e := range elfs {
		if err := a.addELF(e); err != nil {
			fail(err)
		}
	}
	for _, e := range hostELFs {
		if err := a.addHostELF(e); err != nil {
			fail(err)
		}
	}
	for _, t := range trees {
		if err := a.addTree(t); err != nil {
			fail(err)
		}
	}
	if len(kmods) > 0 {
		if err := a.addModules(*kver, kmods); err != nil {
			fail(err)
		}
	}
	if err := a.write(*out); err != nil {
		fail(err)
	}
}

// parseFileSpec splits DST=SRC[:MODE] (MODE in octal).
func parseFileSpec(spec string, mode uint64) (dst, src string, _ uint64, _ error) {
	dst, src, ok := strings.Cut(spec, "=")
	if !ok {
		return "", "", 0, fmt.Errorf("%q: want DST=SRC[:MODE]", spec)
	}
	if i := strings.LastIndex(src, ":"); i >= 0 {
		if m, err := strconv.ParseUint(src[i+1:], 8, 32); err == nil {
			mode, src = m, src[:i]
		}
	}
	return dst, src, mode, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkinitramfs:", err)
	os.Exit(1)
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// readStage reads a file of the staging tree, following symlinks inside it.
func (a *archive) readStage(p string) ([]byte, os.FileInfo, error) {
	for i := 0; i < 16; i++ {
		full := filepath.Join(a.stage, p)
		fi, err := os.Lstat(full)
		if err != nil {
			return nil, nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			b, err := os.ReadFile(full)
			return b, fi, err
		}
		t, err := os.Readlink(full)
		if err != nil {
			return nil, nil, err
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = t
	}
	return nil, nil, fmt.Errorf("%s: too many symlinks", p)
}

func (a *archive) addELF(p string) error {
	p = "/" + clean(p)
	if _, ok := a.files[clean(p)]; ok {
		return nil
	}
	b, fi, err := a.readStage(p)
	if err != nil {
		return err
	}
	a.files[clean(p)] = entry{data: b, mode: 0o100000 | uint32(fi.Mode().Perm()) | 0o500}
	return a.addELFDeps(p, b)
}

// addHostELF copies a program built on the host (DST=HOSTSRC[:MODE]) and
// takes its interpreter and libraries from the staging tree, never from
// the host: the image runs what Debian's packages ship.
func (a *archive) addHostELF(spec string) error {
	dst, src, mode, err := parseFileSpec(spec, 0o755)
	if err != nil {
		return fmt.Errorf("-hostelf %w", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	a.files[clean(dst)] = entry{data: b, mode: 0o100000 | uint32(mode)}
	return a.addELFDeps(src, b)
}

// addELFDeps adds an ELF file's program interpreter and DT_NEEDED
// libraries (and theirs) from the staging tree.
func (a *archive) addELFDeps(p string, b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			buf := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(buf, 0); err != nil {
				return err
			}
			if err := a.addELF(strings.TrimRight(string(buf), "\x00")); err != nil {
				return fmt.Errorf("interpreter of %s: %w", p, err)
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, lib := range libs {
		found := false
		for _, d := range libDirs {
			if _, err := os.Lstat(filepath.Join(a.stage, d, lib)); err == nil {
				if err := a.addELF(path.Join(d, lib)); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which is not in the staging tree", p, lib)
		}
	}
	return nil
}

func (a *archive) addTree(dir string) error {
	root := filepath.Join(a.stage, dir)
	return filepath.WalkDir(root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a.stage, full)
		if d.IsDir() {
			a.files[clean(rel)] = entry{mode: 0o40755}
			return nil
		}
		b, fi, err := a.readStage("/" + rel)
		if err != nil {
			return err
		}
		a.files[clean(rel)] = entry{data: b, mode: 0o100000 | uint32(fi.Mode().Perm())}
		return nil
	})
}

// addModules copies the named modules and their dependencies (the depends=
// field of each module's .modinfo), and writes the load order.
func (a *archive) addModules(kver string, names []string) error {
	base := filepath.Join(a.stage, "lib", "modules", kver)
	paths := map[string]string{}
	err := filepath.WalkDir(base, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); strings.HasSuffix(n, ".ko") {
			paths[norm(strings.TrimSuffix(n, ".ko"))] = full
		}
		return nil
	})
	if err != nil {
		return err
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(string) error
	visit = func(n string) error {
		n = norm(n)
		switch state[n] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", n)
		case 2:
			return nil
		}
		state[n] = 1
		full, ok := paths[n]
		if !ok {
			return fmt.Errorf("module %s not found under %s", n, base)
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		deps, err := moduleDeps(b)
		if err != nil {
			return fmt.Errorf("%s: %w", full, err)
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, n)
		a.files[clean("/lib/modules/"+n+".ko")] = entry{data: b, mode: 0o100644}
		return nil
	}
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			if err := visit(n); err != nil {
				return err
			}
		}
	}
	var sb strings.Builder
	for _, n := range order {
		fmt.Fprintf(&sb, "/lib/modules/%s.ko\n", n)
	}
	a.files["etc/modules.order"] = entry{data: []byte(sb.String()), mode: 0o100644}
	return nil
}

func norm(n string) string { return strings.ReplaceAll(n, "-", "_") }

func moduleDeps(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, nil
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(v) > 0 {
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// write emits the archive as gzipped newc cpio, parents before children.
func (a *archive) write(out string) error {
	// Make sure every parent directory exists in the archive.
	for p := range a.files {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := a.files[d]; !ok {
				a.files[d] = entry{mode: 0o40755}
			}
		}
	}
	names := make([]string, 0, len(a.files))
	for p := range a.files {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	ino := 1
	hdr := func(name string, mode uint32, size int) {
		fmt.Fprintf(zw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
		ino++
		zw.Write([]byte(name + "\x00"))
		pad(zw, 110+len(name)+1)
	}
	for _, n := range names {
		e := a.files[n]
		hdr(n, e.mode, len(e.data))
		zw.Write(e.data)
		pad(zw, len(e.data))
	}
	hdr("TRAILER!!!", 0, 0)
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func pad(w interface{ Write([]byte) (int, error) }, n int) {
	if r := n % 4; r != 0 {
		w.Write(make([]byte, 4-r))
	}
}
