//go:build !linux || !cgo || noverbs

package verbs

// The stand-in for builds without libibverbs: the package compiles, and
// every entry point fails with ErrUnavailable (no object can be made, so
// the methods of the objects are unreachable but for zero values, which
// report ErrClosed).

import (
	"fmt"
	"runtime"

	"github.com/ibcm/ibcm/cm/qpattr"
)

type stubHandle struct{}

type (
	hDevice  = *stubHandle
	hPD      = *stubHandle
	hMR      = *stubHandle
	hChannel = *stubHandle
	hCQ      = *stubHandle
	hQP      = *stubHandle
	hAH      = *stubHandle
)

type wcBuf struct{}

// errUnavailable says why this build has no libibverbs.
var errUnavailable = func() error {
	why := "built with the noverbs tag"
	switch {
	case runtime.GOOS != "linux":
		why = "libibverbs is Linux-only (GOOS=" + runtime.GOOS + ")"
	case !cgoEnabled:
		why = "built without cgo (CGO_ENABLED=0): build with cgo and Debian's libibverbs-dev installed"
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, why)
}()

func listDevices() ([]DeviceInfo, error)               { return nil, errUnavailable }
func openDevice(string) (hDevice, DeviceInfo, error)   { return nil, DeviceInfo{}, errUnavailable }
func closeDevice(hDevice) error                        { return errUnavailable }
func asyncFD(hDevice) int                              { return -1 }
func queryDevice(hDevice) (DeviceAttr, error)          { return DeviceAttr{}, errUnavailable }
func queryPort(hDevice, uint8) (PortAttr, error)       { return PortAttr{}, errUnavailable }
func queryGIDTable(hDevice, int) ([]gidEntry, error)   { return nil, errUnavailable }
func queryPKey(hDevice, uint8, int) (uint16, error)    { return 0, errUnavailable }
func getAsyncEvent(hDevice) (rawEvent, error)          { return rawEvent{}, errUnavailable }
func allocPD(hDevice) (hPD, error)                     { return nil, errUnavailable }
func deallocPD(hPD) error                              { return errUnavailable }
func deregMR(hMR) error                                { return errUnavailable }
func createCompChannel(hDevice) (hChannel, int, error) { return nil, 0, errUnavailable }
func destroyCompChannel(hChannel) error                { return errUnavailable }
func getCQEvent(hChannel) (uint64, error)              { return 0, errUnavailable }
func destroyCQ(hCQ) error                              { return errUnavailable }
func reqNotifyCQ(hCQ, bool) error                      { return errUnavailable }
func pollCQ(hCQ, *wcBuf, []WC) (int, error)            { return 0, errUnavailable }
func destroyQP(hQP) error                              { return errUnavailable }
func modifyQPs(hQP, []qpattr.Attr) (int, error)        { return 0, errUnavailable }
func queryQP(hQP, qpattr.Mask) (qpattr.Attr, error)    { return qpattr.Attr{}, errUnavailable }
func postSend(hQP, *SendWR, []sge, hAH) error          { return errUnavailable }
func postRecv(hQP, uint64, []sge) error                { return errUnavailable }
func createAH(hPD, *qpattr.AH) (hAH, error)            { return nil, errUnavailable }
func destroyAH(hAH) error                              { return errUnavailable }

func regMR(hPD, []byte, qpattr.Access) (hMR, uint32, uint32, error) {
	return nil, 0, 0, errUnavailable
}

func createCQ(hDevice, int, hChannel, uint64) (hCQ, int, error) { return nil, 0, errUnavailable }

func createQP(hPD, QPType, hCQ, hCQ, QPCap, bool, uint64) (hQP, uint32, QPCap, error) {
	return nil, 0, QPCap{}, errUnavailable
}
