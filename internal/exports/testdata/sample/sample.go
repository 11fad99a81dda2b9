// Package sample is a fixture of the exports counter.
package sample

// T is counted; its fields are not.
type T struct {
	Field  int
	hidden int
}

type hiddenType struct{ Field int }

// I is counted; its methods are not.
type I interface{ M() }

// G is generic.
type G[P any] struct{}

const (
	C1, C2 = 1, 2
	c3     = 3
)

const C4 T0 = 4

type T0 int

var V1, v2 = 1, 2

var (
	V3 = 3
)

func F() {}

func f() {}

func (T) M()          {}
func (*T) N()         {}
func (t *T) n()       {}
func (hiddenType) M() {}
func (G[P]) M()       {}
