package wire

import (
	"net/netip"
)

// GID is a 128-bit InfiniBand global identifier, in wire (network) byte
// order. On RoCE it is an IPv6 or IPv4-mapped address.
type GID [16]byte

// String formats g as IPv6 text ("fe80::1", "::ffff:10.0.0.1").
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// Addr returns g as an IPv6 address (IPv4-mapped addresses stay mapped).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// GIDFromAddr returns the GID of an IP address; an IPv4 address becomes the
// IPv4-mapped GID ::ffff:a.b.c.d, as RoCE uses.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// ParseGID parses IPv6 text, or IPv4 text as an IPv4-mapped GID. Zones are
// rejected.
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return GID{}, &FieldError{Field: "GID", Err: ErrSyntax, Detail: err.Error()}
	}
	if a.Zone() != "" {
		return GID{}, &FieldError{Field: "GID", Err: ErrSyntax, Detail: "zone not allowed in " + s}
	}
	return GIDFromAddr(a), nil
}

// MarshalText implements encoding.TextMarshaler.
func (g GID) MarshalText() ([]byte, error) { return netip.AddrFrom16(g).MarshalText() }

// UnmarshalText implements encoding.TextUnmarshaler.
func (g *GID) UnmarshalText(b []byte) error {
	v, err := ParseGID(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}
