// Command build-s3-server builds the S3 server of the tests (package
// s3test) into the cache directory, unless it is there, and prints its
// path. `make s3-server` runs it before the tests.
package main

import (
	"fmt"
	"os"

	"parley/internal/s3test"
)

func main() {
	p, err := s3test.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("s3-server:", p)
}
