package rdmapeer

import (
	"context"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
)

// Options are a program's own flags: -C and -S, and rping's -v; and the
// data timeout.
type Options struct {
	Count   int  // -C: iterations (rping) or messages (ucmatose, udaddy); 0: the program's default
	Size    int  // -S: bytes per ping or message; 0: the program's default
	Verbose bool // rping -v: every ping's data goes to SessionConfig.OnPing
	// Timeout bounds a data phase: a peer that has not finished it by
	// then ends it with ErrTimeout (the rping server, which serves pings
	// until the client disconnects, bounds each ping). 0: DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is the data timeout of o when it names none: ample for
// a peer on a slow link, which moves the count of messages (or pings) of
// the size at 1 MB/s and takes 10 ms per message, beyond a fixed 10 s for
// the peer to get going.
func DefaultTimeout(o Options) time.Duration {
	n, size := max(o.Count, 10), max(o.Size, 100)
	return 10*time.Second + time.Duration(n)*(10*time.Millisecond+time.Duration(size)*time.Microsecond)
}

// timeout is o's data timeout.
func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout(o)
}

// Program is one example program's data protocol: its buffer and queue
// sizes, what it posts before the connection exists, and its two roles.
type Program struct {
	name string
	ud   bool // SIDR and a UD QP instead of a connection
	// allAtOnce: the program runs its -c connections at once, and its
	// server sends only once all of them are up.
	allAtOnce bool
	// boundsItself: the server applies the data timeout to each of its
	// steps itself (it has no end of its own but the peer's disconnect).
	boundsItself bool
	check        func(o Options) error
	// layout gives the registered memory and queue depths of a connection.
	layout func(o Options) QPConfig
	// prepare posts what must be posted before the REQ or REP goes out.
	prepare func(s *Session) error
	// req adjusts the REQ of an active connection to the program's
	// conn_param (nil: rdma_cm's defaults).
	req func(r *wire.REQ)
	// server and client run the data phase of the passive and the active
	// side; they return whether this side disconnects (false: it waits
	// for the peer's DREQ, which flushes its receives).
	server, client func(ctx context.Context, s *Session) (disconnect bool, err error)
}

var programs = map[string]*Program{}

func register(p *Program) { programs[p.name] = p }

// Lookup returns the program of that name: rping, ucmatose, rdma
// (rdma_server and rdma_client), udaddy, or qp (a QP per connection and no
// data, as cmtime makes them).
func Lookup(name string) (*Program, bool) {
	p, ok := programs[name]
	return p, ok
}

// Names lists the programs, in the order Lookup's documentation gives.
func Names() []string {
	var n []string
	for _, k := range []string{"rping", "ucmatose", "rdma", "udaddy", "qp"} {
		if programs[k] != nil {
			n = append(n, k)
		}
	}
	return n
}

// Name is the program's name, as Lookup takes it.
func (p *Program) Name() string { return p.name }

// UD says the program resolves its peer with SIDR and moves data over a
// UD QP (Session.UDServer, Session.UDClient) instead of a connection.
func (p *Program) UD() bool { return p.ud }

// AllAtOnce says the program's client connects its -c connections at once
// and its server sends on them only once all are up (ucmatose): a client
// that waits for one connection's data before making the next one never
// gets any.
func (p *Program) AllAtOnce() bool { return p.allAtOnce }

// Check says what is wrong with o for this program.
func (p *Program) Check(o Options) error {
	if p.check == nil {
		return nil
	}
	return p.check(o)
}

// Layout is the QP and the buffer a connection of this program needs.
func (p *Program) Layout(o Options) QPConfig { return p.layout(o) }

// AdjustREQ sets what the program's client asks in its REQ beyond
// rdma_cm's defaults (its conn_param).
func (p *Program) AdjustREQ(r *wire.REQ) {
	if p.req != nil {
		p.req(r)
	}
}

func msgCount(o Options, def int) int {
	if o.Count == 0 {
		return def
	}
	return o.Count
}

func msgSize(o Options, def int) int {
	if o.Size == 0 {
		return def
	}
	return o.Size
}

// fillPattern fills b with bytes that tell messages and connections apart.
func fillPattern(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i)
	}
}
