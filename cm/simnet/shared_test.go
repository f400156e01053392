package simnet

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAttachShares(t *testing.T) {
	a, releaseA := Attach(t.Name())
	b, releaseB := Attach(t.Name())
	other, releaseOther := Attach(t.Name() + "-other")
	assert.Equal(t, uint16(1), a.LocalAddr().LID)
	assert.Equal(t, uint16(2), b.LocalAddr().LID, "one fabric per name")
	assert.Equal(t, uint16(1), other.LocalAddr().LID)
	assert.Equal(t, GID(2), b.LocalAddr().GID)
	releaseA()
	releaseA() // once
	releaseB()
	releaseOther()
	c, releaseC := Attach(t.Name())
	defer releaseC()
	assert.Equal(t, uint16(1), c.LocalAddr().LID, "a new fabric once the last endpoint left")
}
