package billing

import "fmt"

// Line is one billed item.
type Line struct {
	SKU      string
	Quantity int
	Cents    int64
}

// Invoice totals lines and applies VAT (in basis points).
type Invoice struct {
	Customer string
	Lines    []Line
	VATBasis int64
}

// Total returns the invoice total in cents, VAT included.
func (i Invoice) Total() int64 {
	var net int64
	for _, l := range i.Lines {
		net += int64(l.Quantity) * l.Cents
	}
	return net + net*i.VATBasis/10000
}

// String renders a one-line summary.
func (i Invoice) String() string {
	return fmt.Sprintf("%s: %d lines, %d cents", i.Customer, len(i.Lines), i.Total())
}
