package simnet

import (
	"math/rand/v2"
	"sync"
)

// GID is the GID of the simulated port with LID lid: fe80::LID.
func GID(lid uint16) [16]byte {
	var g [16]byte
	g[0], g[1] = 0xfe, 0x80
	g[14], g[15] = byte(lid>>8), byte(lid)
	return g
}

// shared are the named fabrics of Attach.
var shared = struct {
	sync.Mutex
	m map[string]*sharedFabric
}{m: map[string]*sharedFabric{}}

type sharedFabric struct {
	f    *Fabric
	refs int
}

// Attach adds an endpoint to the fabric called name, which every Attach
// of that name in the process shares (a listener and a connector of one
// process find each other there); it makes the fabric, with a random
// seed, for the first. release closes the endpoint, and the fabric with
// its last endpoint.
func Attach(name string) (ep *Endpoint, release func()) {
	shared.Lock()
	defer shared.Unlock()
	sf := shared.m[name]
	if sf == nil {
		sf = &sharedFabric{f: NewFabric(Config{Seed: rand.Uint64()})}
		shared.m[name] = sf
	}
	sf.refs++
	ep = sf.f.NewEndpoint()
	var once sync.Once
	return ep, func() {
		once.Do(func() {
			_ = ep.Close()
			shared.Lock()
			defer shared.Unlock()
			if sf.refs--; sf.refs == 0 {
				sf.f.Close()
				delete(shared.m, name)
			}
		})
	}
}
