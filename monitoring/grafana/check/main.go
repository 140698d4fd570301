// Command dashboard-check loads Grafana dashboards with Grafana's own dashboard model
// (grafana-foundation-sdk, generated from Grafana's schemas): every field must be one the
// model knows, with the right type, panel options included (make go-tools; tests/test_monitoring.py).
//
// The import envelope (__inputs, __requires, __elements) is what Grafana's importer reads and
// removes, so it is removed here too, and each ${INPUT} is replaced as the importer does.
//
//	dashboard-check FILE.json...   # exit 0: all load; exit 1: one line per problem
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func check(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var envelope map[string]json.RawMessage
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return err
	}
	var inputs []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	if in, ok := envelope["__inputs"]; ok {
		if err := json.Unmarshal(in, &inputs); err != nil {
			return fmt.Errorf("__inputs: %w", err)
		}
	}
	for _, k := range []string{"__inputs", "__requires", "__elements"} {
		delete(envelope, k)
	}
	body, err := json.Marshal(envelope)
	if err != nil {
		return err
	}
	text := string(body)
	for _, in := range inputs {
		text = strings.ReplaceAll(text, "${"+in.Name+"}", "imported-"+strings.ToLower(in.Name))
	}
	var d dashboard.Dashboard
	if err := nonEmpty(d.UnmarshalJSONStrict([]byte(text))); err != nil {
		return err
	}
	return nonEmpty(d.Validate())
}

// nonEmpty is err unless it is an empty cog.BuildErrors: the generated code returns its error list
// as an error even when the list is empty (a non-nil interface holding a nil slice).
func nonEmpty(err error) error {
	var errs cog.BuildErrors
	if errors.As(err, &errs) && len(errs) == 0 {
		return nil
	}
	return err
}

func main() {
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			failed = true
			for _, line := range strings.Split(err.Error(), "\n") {
				fmt.Printf("%s: %s\n", path, line)
			}
		} else {
			fmt.Printf("%s: ok\n", path)
		}
	}
	if failed || len(os.Args) < 2 {
		os.Exit(1)
	}
}
