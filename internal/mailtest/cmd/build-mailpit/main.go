// Command build-mailpit builds the SMTP server of the tests (package
// mailtest) into the cache directory, unless it is there, and prints its
// path. `make mailpit` runs it before the tests.
package main

import (
	"fmt"
	"os"

	"parley/internal/mailtest"
)

func main() {
	p, err := mailtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("mailpit:", p)
}
