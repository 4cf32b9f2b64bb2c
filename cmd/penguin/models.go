package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/config"
)

// newModelsCmd prints the model catalog the llm service shapes requests
// and prices usage with: `penguin models [--provider ID] [--catalog
// FILE|URL] [--json]`. It reads no server: the catalog is built in (with
// the override a server would take from --catalog), and each provider says
// whether the variable that turns on its preset is set here.
func newModelsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "models", Short: "print the model catalog: limits, reasoning levels, prices", Args: noArgs}
	fs := cmd.Flags()
	provider := fs.String("provider", "", "only this provider's models (a catalog provider id, such as openai or deepseek)")
	override := fs.String("catalog", "", "model catalog `FILE` or http(s) URL laid over the built-in one, as penguin serve --catalog takes it")
	asJSON := fs.Bool("json", false, "print the catalog as JSON, in the format --catalog takes")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return models(cmd.Context(), *provider, *override, *asJSON)
	}
	return cmd
}

func models(ctx context.Context, provider, override string, asJSON bool) error {
	cat := catalog.Builtin()
	if override != "" {
		raw, err := catalog.ReadOverride(ctx, override, nil)
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		if cat, err = catalog.Merge(cat, raw); err != nil {
			return fmt.Errorf("models: %s: %w", override, err)
		}
	}
	if provider != "" {
		p := cat.Provider(provider)
		if p == nil {
			ids := make([]string, len(cat.Providers))
			for i, p := range cat.Providers {
				ids[i] = p.ID
			}
			return fmt.Errorf("models: the catalog has no provider %q; it has %s", provider, strings.Join(ids, ", "))
		}
		cat = &catalog.Catalog{Source: cat.Source, Providers: []*catalog.Provider{p}}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cat)
	}
	return printCatalog(os.Stdout, cat, os.LookupEnv)
}

// printCatalog writes one table per provider.
func printCatalog(w io.Writer, cat *catalog.Catalog, lookup config.LookupFunc) error {
	np, nm := cat.Size()
	fmt.Fprintf(w, "%d providers, %d models (%s %s, %s). Prices in USD per million tokens.\n", np, nm, cat.Source.Name, shortCommit(cat.Source.Commit), cat.Source.Date)
	for _, p := range cat.Providers {
		fmt.Fprintf(w, "\n%s — %s (%s, %s)\n", p.ID, p.Name, p.API, p.BaseURL)
		if len(p.Env) > 0 {
			state := "not set"
			if v, ok := lookup(p.Env[0]); ok && v != "" {
				state = "set: the preset route is on"
			}
			fmt.Fprintf(w, "  key: %s (%s)\n", strings.Join(p.Env, " or "), state)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  MODEL\tCONTEXT\tOUTPUT\tTHINKING (none low medium high xhigh max)\tTOOLS\tIMAGES\tTEMP\tINPUT\tOUTPUT\tCACHE R/W\tSTATUS")
		for _, m := range p.Models {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, tokens(m.Context), tokens(m.Output), thinkingColumn(m),
				yes(m.Tools), yes(m.Images), yes(m.Temperature), prices(m.Cost)+"\t"+m.Status)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func shortCommit(c string) string { return c[:min(len(c), 12)] }

func tokens(n int64) string {
	switch {
	case n == 0:
		return "?"
	case n%1_000_000 == 0:
		return strconv.FormatInt(n/1_000_000, 10) + "M"
	case n%1000 == 0:
		return strconv.FormatInt(n/1000, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

// thinkingColumn is the wire value of each level, or why there is none.
func thinkingColumn(m *catalog.Model) string {
	switch {
	case !m.Reasoning:
		return "-"
	case len(m.Thinking) == 0:
		return "reasons (not controllable)"
	}
	vals := make([]string, len(catalog.Levels))
	for i, l := range catalog.Levels {
		v := m.Thinking[l]
		if v == "" {
			v = "·"
		}
		vals[i] = v
	}
	return strings.Join(vals, " ")
}

func prices(c *catalog.Cost) string {
	if c == nil {
		return "?\t?\t?"
	}
	cache := func(p *float64) string {
		if p == nil {
			return "="
		}
		return money(*p)
	}
	return money(c.Input) + "\t" + money(c.Output) + "\t" + cache(c.CacheRead) + "/" + cache(c.CacheWrite)
}

func money(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
