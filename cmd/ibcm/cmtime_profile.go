package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startCPUProfile profiles the CPU into the file at path until the returned
// function runs.
func startCPUProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// startExecTrace records a runtime execution trace into the file at path.
func startExecTrace(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("execution trace: %w", err)
	}
	return func() error {
		trace.Stop()
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
