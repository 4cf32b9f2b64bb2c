// Package metrictest reads single series out of a Prometheus registry, for
// the tests that check what the services count.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value returns the value of the gauge or counter name whose labels are
// exactly labels (nil for none), and whether such a series exists.
func Value(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := len(m.GetLabel()) == len(labels)
			for _, l := range m.GetLabel() {
				match = match && labels[l.GetName()] == l.GetValue()
			}
			if !match {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// Get is Value for the tests where an absent series counts as zero.
func Get(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := Value(t, reg, name, labels)
	return v
}
