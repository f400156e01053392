package main

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// madArray is the parameter type of the Peek and Put functions: a whole
// MAD, so that no read or write is ever out of range.
func madArray() *jen.Statement { return jen.Op("*").Index(jen.Id("MADSize")).Byte() }

// putHeader writes v, of the Go type of the byte-aligned header field fl,
// into b.
func putHeader(fl *genField, v *jen.Statement) *jen.Statement {
	if fl.GoType != fl.Base {
		v = jen.Id(fl.Base).Call(v)
	}
	if fl.Width == 8 {
		return jen.Id("b").Index(jen.Lit(fl.Byte)).Op("=").Add(v)
	}
	return jen.Qual(binaryPkg, "BigEndian").Dot(fmt.Sprintf("PutUint%d", fl.Width)).Call(
		jen.Id("b").Index(jen.Lit(fl.Byte), jen.Empty()), v)
}

// getHeader reads the byte-aligned header field fl from b.
func getHeader(fl *genField) *jen.Statement {
	var e *jen.Statement
	if fl.Width == 8 {
		e = jen.Id("b").Index(jen.Lit(fl.Byte))
	} else {
		e = jen.Qual(binaryPkg, "BigEndian").Dot(fmt.Sprintf("Uint%d", fl.Width)).Call(
			jen.Id("b").Index(jen.Lit(fl.Byte), jen.Empty()))
	}
	if fl.GoType != fl.Base {
		e = jen.Id(fl.GoType).Call(e)
	}
	return e
}

// genHeader emits header_gen.go: the MAD common header with its Encode and
// decode, and the functions that read (Peek) or write (Put) one field of a
// MAD in place, without decoding or validating it. The Put functions serve
// code that edits a MAD it does not decode: a fake MAD layer setting the
// TID's high half or answering in place, a prober crafting a malformed MAD.
func genHeader(hdr []genField, pks []peekFunc) *jen.File {
	f := newFile()
	f.Comment("Header is the MAD common header (IBTA Vol 1 13.4.3).")
	f.Type().Id("Header").StructFunc(func(g *jen.Group) {
		for _, fl := range hdr {
			g.Comment(fmt.Sprintf("%s %s It is %d bits at MAD byte %d.", fl.Name, fl.Doc, fl.Width, fl.Byte))
			g.Id(fl.Name).Id(fl.GoType)
		}
	})

	f.Comment("Encode writes h into b[:HeaderSize], with the reserved bytes zero.")
	f.Comment("It writes the fields as they are; EncodeMAD fills in the CM defaults.")
	f.Func().Params(jen.Id("h").Op("*").Id("Header")).Id("Encode").Params(jen.Id("b").Index().Byte()).Error().BlockFunc(func(g *jen.Group) {
		g.If(jen.Len(jen.Id("b")).Op("<").Id("HeaderSize")).Block(jen.Return(jen.Id("ErrShortBuffer")))
		g.Id("b").Op("=").Id("b").Index(jen.Empty(), jen.Id("HeaderSize"))
		g.Clear(jen.Id("b"))
		for i := range hdr {
			g.Add(putHeader(&hdr[i], jen.Id("h").Dot(hdr[i].Name)))
		}
		g.Return(jen.Nil())
	})

	f.Comment("decode reads h from b without validating it; len(b) >= HeaderSize.")
	f.Func().Params(jen.Id("h").Op("*").Id("Header")).Id("decode").Params(jen.Id("b").Index().Byte()).BlockFunc(func(g *jen.Group) {
		g.Id("b").Op("=").Id("b").Index(jen.Empty(), jen.Id("HeaderSize"))
		for i := range hdr {
			g.Id("h").Dot(hdr[i].Name).Op("=").Add(getHeader(&hdr[i]))
		}
	})

	for i := range hdr {
		fl := &hdr[i]
		f.Comment(fmt.Sprintf("Peek%s reads the header's %s from the MAD in b, in place.", fl.Name, fl.Name))
		f.Func().Id("Peek" + fl.Name).Params(jen.Id("b").Add(madArray())).Id(fl.GoType).Block(
			jen.Return(getHeader(fl)))
	}
	for i := range hdr {
		fl := &hdr[i]
		f.Comment(fmt.Sprintf("Put%s writes v as the header's %s of the MAD in b, in place.", fl.Name, fl.Name))
		f.Func().Id("Put"+fl.Name).Params(jen.Id("b").Add(madArray()), jen.Id("v").Id(fl.GoType)).Block(
			putHeader(fl, jen.Id("v")))
	}

	for _, p := range pks {
		var wires []string
		for _, c := range p.Cases {
			wires = append(wires, c.Wires...)
		}
		f.Comment(fmt.Sprintf("Peek%s reads the %s field of the message in b in place, without", p.Name, p.Name))
		f.Comment("decoding or validating the MAD. It reports false, with a zero value, when")
		f.Comment(fmt.Sprintf("b's attribute ID names a message without that field; %s %s it.", strings.Join(wires, ", "), hasOrHave(len(wires))))
		f.Func().Id("Peek"+p.Name).Params(jen.Id("b").Add(madArray())).Params(jen.Id(p.GoType), jen.Bool()).Block(
			jen.Switch(jen.Id("PeekAttrID").Call(jen.Id("b"))).BlockFunc(func(g *jen.Group) {
				for _, c := range p.Cases {
					var ids []jen.Code
					for _, a := range c.Attrs {
						ids = append(ids, jen.Id(a))
					}
					g.Case(ids...).Block(jen.Return(readExpr(&c.Field, headerSize), jen.True()))
				}
			}),
			jen.Return(jen.Lit(0), jen.False()),
		)
	}
	return f
}

func hasOrHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
