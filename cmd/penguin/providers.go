package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm"
)

// The provider route commands: penguin providers list, add, update,
// remove and test, each one LLMService call against --engine or the
// embedded server. Without --project they act on the global routes
// (administrators only on a team server); with it, on that project's
// (its owners). A key is read from stdin or a hidden prompt, never from
// an argument, which every user of the machine could read.

// routeFlags are the flags that describe a route, for add and update.
type routeFlags struct {
	typ, baseURL, catalog string
	models, headers       []string
}

func addRouteFlags(fs *pflag.FlagSet) *routeFlags {
	f := &routeFlags{}
	fs.StringVar(&f.typ, "type", "openai", "wire protocol: openai (Chat Completions), openai-responses, anthropic or gemini")
	fs.StringVar(&f.baseURL, "base-url", "", "API base URL (default: the vendor's own)")
	fs.StringVar(&f.catalog, "catalog", "", "catalog provider whose models the route follows (default: the one named like the route; none for no catalog models)")
	fs.StringSliceVar(&f.models, "model", nil, "a model id to list beside the catalog's (repeatable)")
	fs.StringArrayVar(&f.headers, "header", nil, "a header NAME=VALUE sent with every request (repeatable)")
	return f
}

// route is the route the flags describe, called name.
func (f *routeFlags) route(name string) (*penguinv1.ProviderRoute, error) {
	r := &penguinv1.ProviderRoute{Name: name, Type: f.typ, BaseUrl: f.baseURL, Catalog: f.catalog, Models: f.models}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok {
			return nil, usageErrorf("--header %q: want NAME=VALUE", h)
		}
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[k] = v
	}
	return r, nil
}

func newProvidersCmd() *cobra.Command {
	var addFlags, updateFlags *routeFlags // bound to their commands' flags below
	noKey, newKey := new(bool), new(bool)
	model := new(string)
	add := &cobra.Command{Use: "add NAME", Short: "add a route; its API key is read from stdin or a prompt", Args: nArgs("penguin providers add NAME [--type T] [--base-url URL] [--model ID]... [--no-key]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			r, err := addFlags.route(args[0])
			if err != nil {
				return err
			}
			key := ""
			if !*noKey {
				if key, err = readSecret(a.in, "the API key of "+args[0]); err != nil {
					return err
				}
			}
			resp, err := a.llm.AddProvider(c.Context(), &penguinv1.AddProviderRequest{Project: a.project, Route: r, ApiKey: key})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "added %s\n", describeRoute(resp.GetProvider()))
			return nil
		}}
	addFlags = addRouteFlags(add.Flags())
	add.Flags().BoolVar(noKey, "no-key", false, "the route takes no key (a server of your own at --base-url)")
	update := &cobra.Command{Use: "update NAME", Short: "replace a route's settings, keeping its key unless --key", Args: nArgs("penguin providers update NAME [--type T] [--base-url URL] [--model ID]... [--key]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			r, err := updateFlags.route(args[0])
			if err != nil {
				return err
			}
			req := &penguinv1.UpdateProviderRequest{Project: a.project, Route: r}
			if *newKey {
				key, err := readSecret(a.in, "the new API key of "+args[0])
				if err != nil {
					return err
				}
				req.ApiKey = &key
			}
			resp, err := a.llm.UpdateProvider(c.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "updated %s\n", describeRoute(resp.GetProvider()))
			return nil
		}}
	updateFlags = addRouteFlags(update.Flags())
	update.Flags().BoolVar(newKey, "key", false, "read a new API key from stdin or a prompt (empty removes the key)")
	test := &cobra.Command{Use: "test NAME", Short: "make one short request on a route and say how it went", Args: nArgs("penguin providers test NAME [--model ID]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.llm.TestProvider(c.Context(), &penguinv1.TestProviderRequest{Project: a.project, Name: args[0], ModelId: *model})
			if err != nil {
				return err
			}
			if !resp.GetOk() {
				return fmt.Errorf("%s/%s failed after %d ms: %s", args[0], resp.GetModelId(), resp.GetLatencyMs(), resp.GetOutcome().GetMessage())
			}
			fmt.Fprintf(a.out, "%s/%s answered in %d ms\n", args[0], resp.GetModelId(), resp.GetLatencyMs())
			return nil
		}}
	test.Flags().StringVar(model, "model", "", "the model to ask (default: the route's first listed model, else its cheapest)")
	cmd, cf := agentGroupFlags("providers", "list, add, update, remove and test provider routes, and rotate the secret of their keys", false,
		&cobra.Command{Use: "list", Short: "list the routes (global, and --project's), keys masked", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.llm.ListProviders(c.Context(), &penguinv1.ListProvidersRequest{Project: a.project})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tPROJECT\tORIGIN\tKEY\tBASE URL")
			for _, p := range resp.GetProviders() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.GetName(), p.GetType(), orDash(p.GetProject()), p.GetOrigin(), keyOf(p), p.GetBaseUrl())
			}
			if n := resp.GetNotice(); n != "" {
				fmt.Fprintln(tw, n)
			}
			return tw.Flush()
		}},
		add, update,
		&cobra.Command{Use: "remove NAME", Short: "remove a route added through the API", Args: nArgs("penguin providers remove NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.llm.RemoveProvider(c.Context(), &penguinv1.RemoveProviderRequest{Project: a.project, Name: args[0]})
			return err
		}},
		test,
	)
	cmd.PersistentFlags().Lookup("project").Usage = "the project whose routes to manage (default: the global routes)"
	cmd.AddCommand(newRotateKeyCmd(cf))
	return cmd
}

// newRotateKeyCmd is `penguin providers rotate-key`, a key rotation's last
// step: it re-seals every stored route's API key under the first secret
// of the route key secret. With --engine it asks that server
// (LLMService.ResealProviderKeys, an administrator's call, recorded in the
// engine's audit log); without, it works on the route store directly, so
// it takes the store flags its group shares with penguin serve
// (--routes-store, --routes-key-file, --store, --home) and runs where
// those reach the store: beside a local server, or in an llm pod, whose
// environment names the store. No engine sees that, so it is in no audit
// log.
func newRotateKeyCmd(cf *clientFlags) *cobra.Command {
	af := cf.embedded
	return &cobra.Command{
		Use:   "rotate-key",
		Short: "re-seal every stored route's API key under the first secret of the route key secret",
		Long: `Rotate the secret that encrypts the stored provider routes' API keys:

  1. Put the new secret on the first line of the route key secret
     (--routes-key-file, PENGUIN_ROUTES_KEY, or routes.key in the data
     directory) and keep the old one on the line after it. Restart the
     servers: they seal new keys under the new secret and still open the
     old ones.
  2. Run penguin providers rotate-key --engine ADDR as an administrator:
     the server re-seals every stored key under the new secret, in one
     transaction, and records it in the audit log. A key that opens under
     none of the secrets stops it before it changes anything, and is
     named. Without --engine the command opens the route store itself
     (the store flags below), which no audit log records.
  3. Remove the old secret's line and restart the servers again.`,
		Args: nArgs("penguin providers rotate-key [--engine ADDR | --routes-store URL --routes-key-file FILE]", 0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if cf.engine != "" {
				conn, err := cf.connect(c.Context())
				if err != nil {
					return fmt.Errorf("providers rotate-key: %w", err)
				}
				defer conn.Close()
				resp, err := conn.llm.ResealProviderKeys(c.Context(), &penguinv1.ResealProviderKeysRequest{})
				if err != nil {
					return fmt.Errorf("providers rotate-key: %w", statusError(err))
				}
				fmt.Fprintf(c.OutOrStdout(), "re-sealed %d stored API keys under the first route key secret\n", resp.GetResealed())
				return nil
			}
			cfg, err := af.llm.config()
			if err != nil {
				return fmt.Errorf("providers rotate-key: %w", err)
			}
			if cfg.RouteStore == "" || len(cfg.RouteSecret) == 0 {
				home, err := af.engine.dataDir()
				if err != nil {
					return fmt.Errorf("providers rotate-key: %w", err)
				}
				store := af.engine.storeURL
				if store == "" {
					store = filepath.Join(home, "penguin.db")
				}
				routeStoreDefaults(cfg, store, home)
			}
			if cfg.RouteStore == "" {
				return fmt.Errorf("providers rotate-key: the route store's key secret is needed: --routes-key-file FILE or %s", routesKeyVar)
			}
			cfg.MakeRouteKey = false // a new secret would open nothing
			n, err := llm.ResealRoutes(c.Context(), *cfg)
			if err != nil {
				return fmt.Errorf("providers rotate-key: %w", err)
			}
			fmt.Fprintf(c.OutOrStdout(), "re-sealed %d stored API keys under the first route key secret\n", n)
			return nil
		},
	}
}

// describeRoute is one line about a route.
func describeRoute(p *penguinv1.ProviderInfo) string {
	where := "global"
	if p.GetProject() != "" {
		where = "project " + p.GetProject()
	}
	return fmt.Sprintf("%s (%s, %s, key %s)", p.GetName(), p.GetType(), where, keyOf(p))
}

// keyOf says what a listing shows of a route's key: the stored key
// masked, where another key comes from, or none.
func keyOf(p *penguinv1.ProviderInfo) string {
	switch {
	case p.GetKeyHint() != "":
		return p.GetKeyHint()
	case p.GetCredentialSource() != "":
		return p.GetCredentialSource()
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
