package cm_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzManager drives the system of the API property (two Managers, a
// hostile port, the application's calls) from its input: a three-byte
// configuration, then commands of 8 bytes each (kind, Manager, and three
// 16-bit arguments, as apOp). After each command no call has panicked and
// every call past its deadline has returned; at the end the same checks as
// the property's, except the goroutine count (the fuzzer's workers make it
// noisy; the property checks it).
func FuzzManager(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ops := apDecode(data)
		s := apNewSys(m, true)
		for _, o := range ops {
			s.run(o)
			s.check()
		}
		fails := s.finish()
		require.Empty(t, fails, "%s\n%s", m, strings.Join(s.log, "\n"))
	})
}

// apFuzzMaxOps bounds the commands of one input: each may wait up to a
// few milliseconds.
const apFuzzMaxOps = 48

// apDecode reads the configuration and the commands of a FuzzManager
// input. Byte 0: the send queues (of 1, 2, 4, 32, default each); byte 1:
// loss (bits 0-1), duplication (2-3), the hostile peer answering (4), the
// server loops (5), a refusing LAP policy (6), a small MaxIDs (7); byte 2:
// MRADelay and MaxHalfOpen (as apModel's generator picks them).
func apDecode(data []byte) (apModel, []apOp) {
	var cfg [3]byte
	copy(cfg[:], data)
	qs := []int{1, 2, 4, 32, 0}
	m := apModel{Seed: 1, SendQueue: [2]int{qs[cfg[0]%5], qs[(cfg[0]/5)%5]},
		Loss: []float64{0, 0.05, 0.2, 0}[cfg[1]&3], Dup: []float64{0, 0.1, 0.3, 0}[cfg[1]>>2&3],
		HostileAuto: cfg[1]&16 != 0, Serve: cfg[1]&32 != 0, LAPRefuse: cfg[1]&64 != 0}
	if cfg[1]&128 != 0 {
		m.MaxIDs = 48
	}
	m.MRADelay = []time.Duration{0, 0, 0, -1, time.Millisecond, time.Hour}[cfg[2]%6]
	m.MaxHalfOpen = []int{0, 0, 0, 2, 8, 0}[cfg[2]%6]
	var ops []apOp
	for rest := data[min(len(data), 3):]; len(rest) >= 8 && len(ops) < apFuzzMaxOps; rest = rest[8:] {
		ops = append(ops, apOp{K: apKind(rest[0] % byte(apNumKinds)), M: rest[1] % 2,
			A: uint16(rest[2])<<8 | uint16(rest[3]), B: uint16(rest[4])<<8 | uint16(rest[5]), C: uint16(rest[6])<<8 | uint16(rest[7])})
	}
	return m, ops
}

// apEncode is apDecode's inverse, for the seed corpus.
func apEncode(cfg0, cfg1 byte, ops ...apOp) []byte {
	b := []byte{cfg0, cfg1, 0}
	for _, o := range ops {
		b = append(b, byte(o.K), o.M, byte(o.A>>8), byte(o.A), byte(o.B>>8), byte(o.B), byte(o.C>>8), byte(o.C))
	}
	return b
}

// Argument values of the seeds (see the apSys methods).
const (
	apCtx100ms = (6<<4 | 1) << 4 // C of Connect and ResolveSIDR: a 100 ms context
	apCtx30ms  = (5<<4 | 1) << 4
	apCtxLong  = 6<<4 | 1 // C of the other calls: 100 ms
	apToPeer   = 0        // A of Connect and ResolveSIDR
	apToHost   = 1
	apBadQPN   = 0      // B of Connect: QPN 0 without a QP
	apQPN      = 1 << 6 // (also the service ID Serve listens on)
	apServeSID = 4 << 4 // B of Connect: the service ID Serve listens on
	apWithQP   = 1      // C of Connect: with a QP
)

// apFuzzSeeds are the seed corpus of FuzzManager, by name: inputs that
// reproduce the defects the shell had, and a few that only exercise it.
// TestFuzzManagerCorpus keeps testdata/fuzz/FuzzManager equal to them.
// Beside them there are the inputs the fuzzer itself found a defect with,
// renamed for what they found.
func apFuzzSeeds() map[string][]byte {
	const (
		serve   = 32
		auto    = 16
		queue1  = 0 // both send queues of 1
		queueOK = 24
		lossy   = 1 | 1<<2
		smallID = 128
	)
	sleep := func(us uint16) apOp { return apOp{K: apSleep, A: us} }
	connectHost := func(c uint16) apOp {
		return apOp{K: apConnect, A: apToHost, B: apQPN | apServeSID, C: c}
	}
	// answer the newest MAD a Manager sent with exact variant v (12-15)
	answer := func(v, param uint16) apOp { return apOp{K: apInject, A: 6, B: param << 8, C: v} }
	return map[string][]byte{
		"apr-info-length-above-72": apEncode(queueOK, 0,
			connectHost(apCtx100ms), sleep(1000), answer(14, 0), sleep(2000),
			apOp{K: apLoadAltPath, A: 0, B: 1, C: apCtxLong}, sleep(1000), answer(12, 1), sleep(2000)),
		"rep-and-rej-in-one-flush-connect-with-qp-context-ends": apEncode(queueOK, 0,
			connectHost(apCtx30ms|apWithQP), sleep(500), answer(13, 3), apOp{K: apCancel}, sleep(2000),
			connectHost(apCtx30ms|apWithQP), sleep(500), answer(13, 1), sleep(100), apOp{K: apCancel}),
		"sidr-flood-listener-never-accepts": apEncode(queueOK, smallID,
			apOp{K: apListen, A: 0, B: 0, C: 4}, apOp{K: apListen, A: 1, B: 0, C: 4},
			apOp{K: apInject, A: 4, B: 63, C: 1}, apOp{K: apInject, A: 4, B: 63, C: 2}, sleep(1000),
			apOp{K: apConnect, M: 1, A: apToPeer, B: apQPN, C: apCtx30ms}),
		"loadaltpath-nil": apEncode(queueOK, serve,
			apOp{K: apConnect, A: apToPeer, B: apQPN | apServeSID, C: apCtx100ms}, sleep(1500),
			apOp{K: apLoadAltPath, A: 0, B: 0, C: apCtxLong}),
		"sidr-reply-nil": apEncode(queueOK, 0,
			apOp{K: apListen, M: 1, A: 2, B: 0, C: 4}, apOp{K: apResolveSIDR, A: apToPeer, B: 2, C: apCtx100ms | 1},
			sleep(500), apOp{K: apAcceptSIDR, M: 1, A: 0, B: 3, C: apCtxLong}),
		"connect-nil":     apEncode(queueOK, 0, apOp{K: apConnect, A: 15 * 32, C: apCtx30ms}),
		"resolvesidr-nil": apEncode(queueOK, 0, apOp{K: apResolveSIDR, A: 15 * 8, C: apCtx30ms}),
		"connect-zero-address-and-qpn-0": apEncode(queueOK, 0,
			apOp{K: apConnect, A: 3, B: apQPN, C: apCtx30ms}, apOp{K: apConnect, A: apToPeer, B: apBadQPN, C: apCtx30ms}),
		"zero-values": apEncode(queueOK, 0, apOp{K: apZero, C: apCtxLong}),
		"close-with-the-send-queue-full": apEncode(queue1, serve,
			apOp{K: apConnect, A: apToPeer, B: apQPN | apServeSID, C: apCtx100ms},
			apOp{K: apConnect, A: apToPeer, B: apQPN | apServeSID | 1, C: apCtx100ms}, sleep(1500),
			apOp{K: apInject, A: 4, B: 63, C: 7}, apOp{K: apConnClose, A: 0}, apOp{K: apConnClose, A: 1},
			apOp{K: apListen, A: 1, C: 4}, apOp{K: apInject, A: 4, B: 63, C: 8}, apOp{K: apListenerClose, A: 2}),
		"dreq-with-the-send-queue-full": apEncode(queue1, serve,
			apOp{K: apConnect, A: apToPeer, B: apQPN | apServeSID, C: apCtx100ms}, sleep(1500),
			apOp{K: apInject, M: 1, A: 5, B: 31, C: 9}, apOp{K: apDisconnect, A: 0, C: apCtxLong}, sleep(1000)),
		"rtu-with-the-send-queue-full": apEncode(queue1, 0,
			connectHost(apCtx100ms), sleep(300), apOp{K: apInject, A: 4, B: 10, C: 3}, answer(14, 0), sleep(1000)),
		"manager-close-with-requests-pending": apEncode(queueOK, 0,
			apOp{K: apListen, M: 1, A: 0, B: 3, C: 4}, apOp{K: apInject, M: 1, A: 5, B: 4, C: 1}, sleep(500),
			apOp{K: apAccept, A: 0, B: 0, C: apCtxLong}, sleep(500), apOp{K: apManagerClose, M: 1, A: 0}),
		"reject-after-accept": apEncode(queueOK, 0,
			apOp{K: apListen, M: 1, A: 0, B: 3, C: 4}, apOp{K: apInject, M: 1, A: 2, B: 1, C: 1}, sleep(500),
			apOp{K: apAccept, A: 0, B: 4, C: apCtxLong << 8}, sleep(500), apOp{K: apReqReject, A: 0, B: 1, C: apCtxLong},
			sleep(1000)),
		"established-lap-dreq-disconnect": apEncode(queueOK, serve|auto,
			apOp{K: apEstablish, A: 0, C: 0}, apOp{K: apEstablish, A: 1, C: 1},
			apOp{K: apLoadAltPath, A: 0, B: 1, C: apCtxLong}, apOp{K: apLoadAltPath, A: 1, B: 3, C: apCtxLong}, sleep(500),
			answer(15, 0), apOp{K: apDisconnect, A: 0, C: apCtxLong}, apOp{K: apDisconnect, A: 1, C: apCtxLong},
			apOp{K: apAdvance, A: 25}, sleep(500)),
		"transport-fails-with-calls-waiting": apEncode(queueOK, serve,
			apOp{K: apEstablish, A: 0}, apOp{K: apConnect, A: 2, B: apQPN, C: apCtx100ms},
			apOp{K: apResolveSIDR, A: 2, B: 1, C: apCtx100ms}, apOp{K: apBreak, A: 0}, sleep(1000)),
		"stale-reqs-lap-apr-any-state": apEncode(queueOK, serve|auto|lossy,
			apOp{K: apInject, M: 1, A: 2, B: 1, C: 1}, apOp{K: apInject, M: 1, A: 2, B: 1, C: 1},
			apOp{K: apConnect, A: apToHost, B: apQPN, C: apCtx100ms}, sleep(1500),
			apOp{K: apLoadAltPath, A: 0, B: 1, C: apCtxLong}, answer(12, 0),
			apOp{K: apInject, A: 6, B: 0, C: 6}, apOp{K: apInject, A: 7, B: 1, C: 7}, apOp{K: apInject, A: 8, B: 2, C: 8},
			apOp{K: apAdvance, A: 20}, apOp{K: apInject, A: 9, B: 0, C: 6}),
	}
}

// TestFuzzManagerCorpus keeps the seed corpus on disk equal to
// apFuzzSeeds; IBCM_WRITE_FUZZ_SEEDS=1 writes it.
func TestFuzzManagerCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzManager")
	write := os.Getenv("IBCM_WRITE_FUZZ_SEEDS") == "1"
	for name, b := range apFuzzSeeds() {
		want := []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b))
		path := filepath.Join(dir, name)
		if write {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, want, 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "IBCM_WRITE_FUZZ_SEEDS=1 go test ./cm/ -run TestFuzzManagerCorpus writes it")
		require.True(t, bytes.Equal(want, got), "%s differs from apFuzzSeeds: IBCM_WRITE_FUZZ_SEEDS=1 go test ./cm/ -run TestFuzzManagerCorpus", path)
	}
}
