// Package probe is a black-box conformance tester for other InfiniBand
// Communication Managers: it sends crafted CM MADs to a live CM over a
// transport (hw/umad on real hardware), records every answer, and judges
// the answers against what the spec allows.
//
// The allowed answers are not written into the checks. Every check is a
// script that is run twice: once against the live target, and once against
// an ibcm engine (cm/engine) playing the target — a listener on the same
// service ID, whose application accepts every REQ and LAP and answers a
// SIDR_REQ on the UD service — in virtual time, with the same inputs and the
// same timing fields. The engine's transition table is the one spec/cm.tla
// model-checks, so its answers are the spec's. The script adapts to each
// side's answers (the comm IDs and QPNs it learns), and each step's answers
// are reduced to signatures that name what the spec cares about: message
// types, REJ reason and message-rejected, whether a DREP names the DREQ's
// sender, whether a REP comes from a second connection, APR and SIDR_REP
// status, MAD status, and whether anything came at all.
//
// A check passes when every step of both runs has the same signatures. An
// MRA may come at any time (the spec lets a CM delay any answer with one):
// it is noted, never compared. Where the spec allows more than one
// behaviour, the check lists the alternatives by name (Check.Alternatives),
// each with its verdict (NOT-SUPPORTED, a named DEVIATION, or a PASS that
// says which choice the peer made); anything else that differs is a
// DEVIATION.
//
// Checks run concurrently, each with its own comm IDs and QPNs (answers are
// routed to a check by the comm ID or transaction ID they carry); a check
// marked Exclusive runs alone after the others, because its outcome may end
// the target's application (a listener whose connection times out).
package probe
