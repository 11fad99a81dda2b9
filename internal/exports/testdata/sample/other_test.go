package sample

func TestOnly() {}

type TestType int
