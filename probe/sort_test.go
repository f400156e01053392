package probe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReportDeviationsInCatalogueOrder(t *testing.T) {
	cat := Catalogue()
	first, second, third := cat[0].ID, cat[1].ID, cat[2].ID
	r := &Report{Results: []Result{
		{ID: third, Verdict: Deviation},
		{ID: first, Verdict: Pass},
		{ID: second, Verdict: Deviation},
	}}
	r.SortByCatalogue()
	assert.Equal(t, []string{first, second, third}, []string{r.Results[0].ID, r.Results[1].ID, r.Results[2].ID})
	assert.Equal(t, []string{second, third}, r.Deviations())
	assert.Nil(t, (&Report{}).Deviations())
}
