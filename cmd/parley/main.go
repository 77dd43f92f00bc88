// Command parley is Parley's single binary. `parley serve` runs a node: the
// HTTP API, the bus (an embedded NATS by default) and the store (SQLite by
// default, PostgreSQL with --db), plus an admin listener for metrics,
// profiling and health checks. `parley version` prints the build version.
//
// This is the only place where configuration is parsed and where the
// packages of the module are wired together; the packages themselves take
// plain config structs.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"parley"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// execute runs the command line args and returns the process's exit code.
func execute(args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	root := newRootCmd(stdout, stderr, lookupEnv)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "parley:", oneLine(err.Error()))
		return 1
	}
	return 0
}

// oneLine puts an error message on one line: errors.Join and some drivers
// (pgx lists each address it tried) break theirs over several, and a start-up
// failure must read as a single line.
func oneLine(msg string) string {
	var b strings.Builder
	prev := ""
	for line := range strings.Lines(msg) {
		line = strings.TrimSpace(line)
		if line == "" || line == prev {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(prev, ":") {
				b.WriteByte(' ')
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
		prev = line
	}
	return b.String()
}

func newRootCmd(stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *cobra.Command {
	root := &cobra.Command{
		Use:           "parley",
		Short:         "Parley, a self-hostable real-time team chat server",
		SilenceUsage:  true, // a failing server is not a usage mistake
		SilenceErrors: true, // execute prints the error once
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newVersionCmd(), newServeCmd(lookupEnv), newSeedCmd(), newConfigCmd(lookupEnv), newLoadtestCmd(), newChaosCmd(),
		newShardsCmd(lookupEnv), newWorkspacesCmd(lookupEnv), newImportCmd(lookupEnv), newExportCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), parley.Version)
			return err
		},
	}
}
