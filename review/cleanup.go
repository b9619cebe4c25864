package review

// cleanup is a stack of undo functions, run in reverse order unless
// released, in the style of gVisor's pkg/cleanup: a step pushes its undo
// before it acts, so a failure at any point undoes exactly what was done
// (every undo judges from the repository what there is to undo).
type cleanup struct {
	fns []func() error
}

// add pushes f.
func (c *cleanup) add(f func() error) { c.fns = append(c.fns, f) }

// release drops every undo: what was done stays done.
func (c *cleanup) release() { c.fns = nil }

// clean runs every undo, last first, and returns the errors of those that
// failed; it empties the stack.
func (c *cleanup) clean() []error {
	var errs []error
	for i := len(c.fns) - 1; i >= 0; i-- {
		if err := c.fns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	c.fns = nil
	return errs
}
