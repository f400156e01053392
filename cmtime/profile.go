package cmtime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// startCPUProfile profiles the CPU into the file at path until the returned
// function runs.
func startCPUProfile(path string) (func() error, error) {
	return startRecording(path, "cpu profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startExecTrace records a runtime execution trace into the file at path.
func startExecTrace(path string) (func() error, error) {
	return startRecording(path, "execution trace", trace.Start, trace.Stop)
}

// startRecording creates the file at path and starts a recording into it;
// the returned function stops the recording and closes the file. what
// names the recording in start's error.
func startRecording(path, what string, start func(io.Writer) error, stop func()) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return func() error {
		stop()
		return f.Close()
	}, nil
}

// startLookupProfile turns on the sampling a named profile needs (block:
// every blocking event; mutex: every contention) and returns the function
// that writes it to path.
func startLookupProfile(name, path string) func() error {
	switch name {
	case "block":
		runtime.SetBlockProfileRate(1)
	case "mutex":
		runtime.SetMutexProfileFraction(1)
	}
	return func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if name == "allocs" {
			runtime.GC() // up-to-date in-use figures
		}
		if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
			f.Close()
			return fmt.Errorf("%s profile: %w", name, err)
		}
		return f.Close()
	}
}

// Profiles name the files of the Go runtime's profiles of a run; an empty
// name writes none.
type Profiles struct {
	CPU, Mem, Block, Mutex, Exec string
}

// Start starts the profiles asked for; stop writes them.
func (p Profiles) Start() (stop func() error, err error) {
	var closers []func() error
	stop = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	if p.CPU != "" {
		c, err := startCPUProfile(p.CPU)
		if err != nil {
			return nil, err
		}
		closers = append(closers, c)
	}
	if p.Exec != "" {
		c, err := startExecTrace(p.Exec)
		if err != nil {
			_ = stop()
			return nil, err
		}
		closers = append(closers, c)
	}
	for _, l := range []struct{ name, path string }{{"block", p.Block}, {"mutex", p.Mutex}, {"allocs", p.Mem}} {
		if l.path != "" {
			closers = append(closers, startLookupProfile(l.name, l.path))
		}
	}
	return stop, nil
}

// RSS is the process's peak resident set (VmHWM) and its resident set
// now, in KiB as /proc/self/status gives them; ok is false without /proc.
func RSS() (peakKiB, nowKiB string, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", "", false
	}
	kib := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			kib[k] = strings.TrimSuffix(strings.TrimSpace(v), " kB")
		}
	}
	return kib["VmHWM"], kib["VmRSS"], kib["VmHWM"] != ""
}
