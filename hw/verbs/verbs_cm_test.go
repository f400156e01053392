package verbs_test

import (
	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/hw/verbs"
)

// A verbs QP is what a cm connection drives.
var _ cm.QP = (*verbs.QP)(nil)
