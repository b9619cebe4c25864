package main

import "os"

// argsOf returns the process arguments. os is imported for Args only; its
// init does no I/O.
func argsOf() []string { return os.Args }
