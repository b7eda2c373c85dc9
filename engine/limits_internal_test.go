package engine

import "testing"

// TestPageSize: absent or non-positive sizes take the default, sizes above
// MaxPageSize are lowered to it, the others are kept.
func TestPageSize(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	cases := []struct {
		in   *int32
		want int
	}{
		{nil, 25}, {n(0), 25}, {n(-3), 25}, {n(1), 1}, {n(MaxPageSize), MaxPageSize},
		{n(MaxPageSize + 1), MaxPageSize}, {n(2147483647), MaxPageSize},
	}
	for _, c := range cases {
		if got := pageSize(c.in, 25); got != c.want {
			t.Errorf("pageSize(%v) = %d, want %d", deref(c.in), got, c.want)
		}
	}
}
