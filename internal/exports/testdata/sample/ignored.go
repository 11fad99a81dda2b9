//go:build ignore

package sample

func Ignored() {}
