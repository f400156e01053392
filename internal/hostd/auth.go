package hostd

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/internal/hostproto"
)

const defaultMaxTimeWait = engine.DefaultMaxTimeWait

// ServiceRange is a set of service IDs: those s with s&Mask == ID&Mask.
type ServiceRange struct{ ID, Mask uint64 }

// overlaps reports whether two ranges share a service ID: they do unless
// a bit both masks select differs.
func (r ServiceRange) overlaps(o ServiceRange) bool {
	return (r.ID^o.ID)&r.Mask&o.Mask == 0
}

// The RDMA IP CM port spaces (the service ID is space << 16 | port):
// TCP, UDP, IB and IPoIB, as rdma_cm numbers them.
var ipPortSpaces = []uint64{0x0106, 0x0111, 0x013F, 0x0002}

// PrivilegedIPPorts are the service IDs of the IP CM ports below 1024 in
// every port space: the kernel's rdma_cm lets only a process with
// CAP_NET_BIND_SERVICE bind them, so that a program on such a port is one
// the administrator started. It is Config.Privileged's default.
var PrivilegedIPPorts = func() []ServiceRange {
	var rs []ServiceRange
	for _, ps := range ipPortSpaces {
		rs = append(rs, ServiceRange{ID: ps << 16, Mask: ^uint64(1024 - 1)})
	}
	return rs
}()

// listenEntry is one client's listen on a port, as the checks see it.
type listenEntry struct {
	uid uint32
	r   ServiceRange
}

// listenRange is the set of service IDs a listen takes.
func listenRange(b *hostproto.ListenReq) ServiceRange {
	switch {
	case b.Wildcard:
		return ServiceRange{}
	case b.Mask == 0:
		return ServiceRange{ID: b.ServiceID, Mask: ^uint64(0)}
	}
	return ServiceRange{ID: b.ServiceID & b.Mask, Mask: b.Mask}
}

// privileged reports whether the client's user is root or in the
// configured group (its primary group, or a supplementary one).
func (c *client) privileged() bool {
	if c.cred.Uid == 0 {
		return true
	}
	g := c.s.cfg.Group
	if g < 0 {
		return false
	}
	if c.cred.Gid == uint32(g) {
		return true
	}
	for _, sg := range c.groups {
		if sg == uint32(g) {
			return true
		}
	}
	return false
}

// admitListen checks a listen against the privileged ranges and against
// other users' listens on the port, and records it if allowed: the check
// and the record are one step, so two users cannot both pass.
func (c *client) admitListen(r ServiceRange) (*listenEntry, error) {
	if !c.privileged() {
		for _, pr := range c.s.cfg.Privileged {
			if r.overlaps(pr) {
				return nil, fmt.Errorf("%w: service ID %#x mask %#x is in the privileged range %#x/%#x (root or the daemon's group)",
					hostproto.ErrPermission, r.ID, r.Mask, pr.ID, pr.Mask)
			}
		}
	}
	p := c.port
	p.mu.Lock()
	defer p.mu.Unlock()
	for le := range p.listens {
		if le.uid != c.cred.Uid && le.r.overlaps(r) {
			return nil, fmt.Errorf("%w: service ID %#x mask %#x overlaps a listen of another user", hostproto.ErrPermission, r.ID, r.Mask)
		}
	}
	le := &listenEntry{uid: c.cred.Uid, r: r}
	p.listens[le] = struct{}{}
	return le, nil
}

func (p *port) unlisten(le *listenEntry) {
	p.mu.Lock()
	delete(p.listens, le)
	p.mu.Unlock()
}
