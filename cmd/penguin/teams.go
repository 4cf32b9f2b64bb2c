package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/credentials"
	"github.com/penguin-agent/penguin/internal/grpcclient"
)

// The account commands: penguin login, logout, whoami and password, and
// the groups users, projects and tokens, each one call of the engine's
// AuthService, UserService, ProjectService or TokenService
// (proto/penguin/v1/teams.proto), which decides who may do what.
//
// `penguin login` keeps the credential it gets in the user's credentials
// file (package credentials), under the address given to --engine; every
// client command with that --engine then presents it, unless
// PENGUIN_AUTH_TOKEN or --auth-token-file names another.

// teamCmd is what an account command runs with: a connection to the
// server and where it writes.
type teamCmd struct {
	conn grpc.ClientConnInterface
	out  io.Writer
	in   *os.File
}

func (t *teamCmd) auth() penguinv1.AuthServiceClient { return penguinv1.NewAuthServiceClient(t.conn) }
func (t *teamCmd) users() penguinv1.UserServiceClient {
	return penguinv1.NewUserServiceClient(t.conn)
}
func (t *teamCmd) projects() penguinv1.ProjectServiceClient {
	return penguinv1.NewProjectServiceClient(t.conn)
}
func (t *teamCmd) tokens() penguinv1.TokenServiceClient {
	return penguinv1.NewTokenServiceClient(t.conn)
}

type teamCmdKey struct{}

func tc(c *cobra.Command) *teamCmd { return c.Context().Value(teamCmdKey{}).(*teamCmd) }

// teamGroup makes a command whose subcommands each run with a connected
// teamCmd: to --engine with its stored sign-in, or to the embedded server
// (whose one user is the local admin).
func teamGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: unknownCommand}
	cf := addClientFlags(cmd.PersistentFlags())
	cf.embedded.llmOptional = true
	withTeamConn(cf, use, subs...)
	cmd.AddCommand(subs...)
	return cmd
}

// withTeamConn wraps each command's RunE so that it runs with a teamCmd
// connected through cf; use names the group in errors.
func withTeamConn(cf *clientFlags, use string, cmds ...*cobra.Command) {
	for _, sub := range cmds {
		run := sub.RunE
		sub.RunE = func(c *cobra.Command, args []string) error {
			conn, err := cf.connect(c.Context())
			if err != nil {
				return fmt.Errorf("%s: %w", use, err)
			}
			defer conn.Close()
			t := &teamCmd{conn: conn.conn, out: c.OutOrStdout(), in: os.Stdin}
			c.SetContext(context.WithValue(c.Context(), teamCmdKey{}, t))
			if err := run(c, args); err != nil {
				return fmt.Errorf("%s: %w", strings.TrimPrefix(c.CommandPath(), "penguin "), statusError(err))
			}
			return nil
		}
	}
}

// newLoginCmd builds `penguin login`.
func newLoginCmd() *cobra.Command {
	var engine, user string
	var withToken, withOIDC, noBrowser bool
	cmd := &cobra.Command{
		Use:   "login",
		Short: "sign in to a server and keep the sign-in for the other commands",
		Long: `Sign in to the server at --engine with a user id and password (asked for
on the terminal, without echo, or read from stdin), or with --token a
personal access token (read the same way; never an argument), or with
--oidc through the server's identity provider in a browser: penguin
listens on a random port of 127.0.0.1 for the browser's return and
prints the URL to open (and opens it, unless --no-browser). The
credential is kept in the credentials file of your configuration
directory (readable by you alone), under the address given to --engine;
every command given the same --engine presents it.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if engine == "" {
				return usageErrorf("login: name the server with --engine ADDR (or PENGUIN_ENGINE)")
			}
			file, err := credentials.Default()
			if err != nil {
				return err
			}
			if (withToken && user != "") || (withOIDC && (withToken || user != "")) {
				return usageErrorf("login: give one of --user, --token and --oidc")
			}
			var (
				entry      credentials.Entry
				mustChange bool
			)
			if withOIDC {
				entry, err = signInOIDC(c.Context(), engine, !noBrowser, c.ErrOrStderr())
			} else {
				entry, mustChange, err = signIn(c.Context(), engine, user, withToken, os.Stdin, c.ErrOrStderr())
			}
			if err != nil {
				return fmt.Errorf("login: %w", err)
			}
			if err := file.Put(engine, entry); err != nil {
				return fmt.Errorf("login: keep the sign-in: %w", err)
			}
			until := ""
			if !entry.ExpiresAt.IsZero() {
				until = "; it lasts until " + entry.ExpiresAt.Local().Format("2006-01-02 15:04")
			}
			fmt.Fprintf(c.OutOrStdout(), "Signed in to %s as %s%s.\n", engine, entry.User, until)
			if mustChange {
				fmt.Fprintf(c.OutOrStdout(), "Your password was set for you; choose your own with: penguin password --engine %s\n", engine)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&engine, "engine", "", "address of the server to sign in to")
	cmd.Flags().StringVar(&user, "user", "", "your user id (asked for when not given)")
	cmd.Flags().BoolVar(&withToken, "token", false, "sign in with a personal access token, read from stdin or a hidden prompt")
	cmd.Flags().BoolVar(&withOIDC, "oidc", false, "sign in through the server's identity provider, in a browser")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "with --oidc: print the URL to open, do not open a browser")
	return cmd
}

// signIn signs in to engine and returns what to keep, and whether the
// user must change their password.
func signIn(ctx context.Context, engine, user string, withToken bool, in *os.File, prompt io.Writer) (credentials.Entry, bool, error) {
	if withToken {
		secret, err := readSecret(in, "personal access token")
		if err != nil {
			return credentials.Entry{}, false, err
		}
		who, err := whoAmI(ctx, engine, secret)
		if err != nil {
			return credentials.Entry{}, false, err
		}
		if who.GetUser() == nil {
			return credentials.Entry{}, false, errors.New("that is not a personal access token (the service token is given with PENGUIN_AUTH_TOKEN, not kept)")
		}
		return credentials.Entry{Secret: secret, User: who.GetUser().GetUserId()}, false, nil
	}
	if user == "" {
		if !isTerminal(in) {
			return credentials.Entry{}, false, errors.New("give --user when the password comes from stdin")
		}
		fmt.Fprint(prompt, "user: ")
		line, err := bufio.NewReader(in).ReadString('\n')
		if user = strings.TrimSpace(line); user == "" {
			return credentials.Entry{}, false, fmt.Errorf("no user id given: %w", err)
		}
	}
	pw, err := passwords(in, "password of "+user)
	if err != nil {
		return credentials.Entry{}, false, err
	}
	conn, err := grpcclient.New(engine, grpcclient.Options{})
	if err != nil {
		return credentials.Entry{}, false, err
	}
	defer conn.Close()
	resp, err := penguinv1.NewAuthServiceClient(conn).SignIn(ctx, &penguinv1.SignInRequest{UserId: user, Password: pw[0]})
	if err != nil {
		return credentials.Entry{}, false, statusError(err)
	}
	who, err := whoAmI(ctx, engine, resp.GetSessionToken())
	if err != nil {
		return credentials.Entry{}, false, err
	}
	return credentials.Entry{Secret: resp.GetSessionToken(), User: user, ExpiresAt: resp.GetExpiresAt().AsTime()}, who.GetMustChangePassword(), nil
}

// whoAmI asks engine who secret is.
func whoAmI(ctx context.Context, engine, secret string) (*penguinv1.WhoAmIResponse, error) {
	conn, err := grpcclient.New(engine, grpcclient.Options{Token: secret})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	who, err := penguinv1.NewAuthServiceClient(conn).WhoAmI(ctx, &penguinv1.WhoAmIRequest{})
	if err != nil {
		return nil, statusError(err)
	}
	return who, nil
}

// newLogoutCmd builds `penguin logout`.
func newLogoutCmd() *cobra.Command {
	var engine string
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "end the sign-in kept for a server and forget it",
		Long: `End the sign-in that penguin login kept for the server at --engine (the
server ends its login session) and remove it from the credentials file.
A personal access token is only forgotten: revoke it with penguin tokens
revoke.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if engine == "" {
				return usageErrorf("logout: name the server with --engine ADDR (or PENGUIN_ENGINE)")
			}
			file, err := credentials.Default()
			if err != nil {
				return err
			}
			e, ok, err := file.Get(engine)
			if err != nil {
				return fmt.Errorf("logout: %w", err)
			}
			if !ok {
				fmt.Fprintf(c.OutOrStdout(), "Not signed in to %s.\n", engine)
				return nil
			}
			if strings.HasPrefix(e.Secret, "pgn_ses_") {
				if err := signOut(c.Context(), engine, e.Secret); err != nil {
					return fmt.Errorf("logout: %w (the sign-in is still kept; try again)", err)
				}
			}
			if err := file.Delete(engine); err != nil {
				return fmt.Errorf("logout: %w", err)
			}
			fmt.Fprintf(c.OutOrStdout(), "Signed out of %s.\n", engine)
			return nil
		},
	}
	cmd.Flags().StringVar(&engine, "engine", "", "address of the server to sign out of")
	return cmd
}

// signOut ends the login session secret on engine; one that has already
// ended is no error.
func signOut(ctx context.Context, engine, secret string) error {
	conn, err := grpcclient.New(engine, grpcclient.Options{Token: secret})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = penguinv1.NewAuthServiceClient(conn).SignOut(ctx, &penguinv1.SignOutRequest{})
	if status.Code(err) == codes.Unauthenticated {
		return nil
	}
	if err != nil {
		return statusError(err)
	}
	return nil
}

// newWhoAmICmd builds `penguin whoami` and `penguin password`, which
// connect as the other client commands do.
func newWhoAmICmd() []*cobra.Command {
	whoami := &cobra.Command{Use: "whoami", Short: "say who the server takes you for", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
		t := tc(c)
		who, err := t.auth().WhoAmI(c.Context(), &penguinv1.WhoAmIRequest{})
		if err != nil {
			return err
		}
		mode := strings.ToLower(strings.TrimPrefix(who.GetMode().String(), "SERVER_MODE_"))
		switch u := who.GetUser(); {
		case who.GetOperator():
			fmt.Fprintf(t.out, "the operator (service token) on a %s server\n", mode)
		default:
			role := "user"
			if u.GetAdmin() {
				role = "admin"
			}
			scope := ""
			if who.GetScope() == penguinv1.TokenScope_TOKEN_SCOPE_READ {
				scope = ", read-only token"
			}
			fmt.Fprintf(t.out, "%s (%s%s) on a %s server\n", u.GetUserId(), role, scope, mode)
			if who.GetMustChangePassword() {
				fmt.Fprintln(t.out, "Your password was set for you; choose your own with: penguin password")
			}
		}
		return nil
	}}
	password := &cobra.Command{Use: "password", Short: "change your password (asked for without echo)", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
		t := tc(c)
		ps, err := newPassword(t.in, "new password", "current password")
		if err != nil {
			return err
		}
		if _, err := t.auth().ChangePassword(c.Context(), &penguinv1.ChangePasswordRequest{OldPassword: ps[0], NewPassword: ps[1]}); err != nil {
			return err
		}
		fmt.Fprintln(t.out, "Password changed; your other sign-ins have ended.")
		return nil
	}}
	for _, cmd := range []*cobra.Command{whoami, password} {
		cf := addClientFlags(cmd.Flags())
		cf.embedded.llmOptional = true
		withTeamConn(cf, cmd.Name(), cmd)
	}
	return []*cobra.Command{whoami, password}
}

// passwords reads one password per prompt: from a terminal without echo,
// or else one line each from stdin.
func passwords(in *os.File, prompts ...string) ([]string, error) {
	out := make([]string, 0, len(prompts))
	if isTerminal(in) {
		for _, p := range prompts {
			fmt.Fprintf(os.Stderr, "%s: ", p)
			v, err := term.ReadPassword(in.Fd())
			fmt.Fprintln(os.Stderr)
			if err != nil {
				return nil, err
			}
			out = append(out, string(v))
		}
		return out, nil
	}
	r := bufio.NewReader(io.LimitReader(in, 1<<16))
	for _, p := range prompts {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return nil, fmt.Errorf("stdin holds no %s (one line each)", p)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		out = append(out, line)
	}
	return out, nil
}

// newPassword reads a password to set: twice on a terminal (they must
// match), once from stdin. before are passwords to read first (the
// current one).
func newPassword(in *os.File, what string, before ...string) ([]string, error) {
	prompts := append(before, what)
	if isTerminal(in) {
		prompts = append(prompts, what+" again")
	}
	ps, err := passwords(in, prompts...)
	if err != nil {
		return nil, err
	}
	if isTerminal(in) {
		if ps[len(ps)-1] != ps[len(ps)-2] {
			return nil, errors.New("the two passwords differ")
		}
		ps = ps[:len(ps)-1]
	}
	return ps, nil
}

// newUsersCmd builds `penguin users`.
func newUsersCmd() *cobra.Command {
	var name string
	var admin bool
	create := &cobra.Command{Use: "create USER", Short: "create an account; its first password is asked for without echo (or read from stdin)", Args: nArgs("penguin users create USER [--name NAME] [--admin]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			t := tc(c)
			pw, err := newPassword(t.in, "first password of "+args[0])
			if err != nil {
				return err
			}
			resp, err := t.users().CreateUser(c.Context(), &penguinv1.CreateUserRequest{UserId: args[0], Name: name, Password: pw[0], Admin: admin})
			if err != nil {
				return err
			}
			fmt.Fprintf(t.out, "Created %s; they choose their own password at first sign-in.\n", resp.GetUser().GetUserId())
			return nil
		}}
	create.Flags().StringVar(&name, "name", "", "display name")
	create.Flags().BoolVar(&admin, "admin", false, "the user manages users")
	setDisabled := func(disabled bool) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			_, err := tc(c).users().UpdateUser(c.Context(), &penguinv1.UpdateUserRequest{UserId: args[0], Disabled: &disabled})
			return err
		}
	}
	return teamGroup("users", "list, create, disable, enable and delete accounts, and reset passwords (admins)",
		&cobra.Command{Use: "list", Short: "list the accounts", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			t := tc(c)
			resp, err := t.users().ListUsers(c.Context(), &penguinv1.ListUsersRequest{})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(t.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tNAME\tEMAIL\tROLE\tSTATE\tCREATED")
			for _, u := range resp.GetUsers() {
				role, state := "user", "enabled"
				if u.GetAdmin() {
					role = "admin"
				}
				if u.GetDisabled() {
					state = "disabled"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", u.GetUserId(), u.GetName(), u.GetEmail(), role, state, when(u.GetCreatedAt()))
			}
			return tw.Flush()
		}},
		create,
		&cobra.Command{Use: "disable USER", Short: "disable an account and end its sign-ins", Args: nArgs("penguin users disable USER", 1, 1), RunE: setDisabled(true)},
		&cobra.Command{Use: "enable USER", Short: "enable a disabled account", Args: nArgs("penguin users enable USER", 1, 1), RunE: setDisabled(false)},
		&cobra.Command{Use: "delete USER", Short: "delete an account with its memberships, tokens and sign-ins", Args: nArgs("penguin users delete USER", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			_, err := tc(c).users().DeleteUser(c.Context(), &penguinv1.DeleteUserRequest{UserId: args[0]})
			return err
		}},
		&cobra.Command{Use: "reset-password USER", Short: "set a user's password (asked for without echo) and end their sign-ins", Args: nArgs("penguin users reset-password USER", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			t := tc(c)
			pw, err := newPassword(t.in, "new password of "+args[0])
			if err != nil {
				return err
			}
			_, err = t.users().ResetPassword(c.Context(), &penguinv1.ResetPasswordRequest{UserId: args[0], Password: pw[0]})
			return err
		}},
	)
}

// roleWord is how the commands spell a role.
func roleWord(r penguinv1.ProjectRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "PROJECT_ROLE_"))
}

// newProjectsCmd builds `penguin projects`.
func newProjectsCmd() *cobra.Command {
	var name, role string
	create := &cobra.Command{Use: "create PROJECT", Short: "create a project that you own", Args: nArgs("penguin projects create PROJECT [--name NAME]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := tc(c).projects().CreateProject(c.Context(), &penguinv1.CreateProjectRequest{ProjectId: args[0], Name: name})
			return err
		}}
	create.Flags().StringVar(&name, "name", "", "display name")
	add := &cobra.Command{Use: "add-member PROJECT USER", Short: "add a member, or change their role (owners)", Args: nArgs("penguin projects add-member PROJECT USER [--role member|owner]", 2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			r := penguinv1.ProjectRole_PROJECT_ROLE_MEMBER
			switch role {
			case "member":
			case "owner":
				r = penguinv1.ProjectRole_PROJECT_ROLE_OWNER
			default:
				return usageErrorf("--role %q: want member or owner", role)
			}
			_, err := tc(c).projects().SetMember(c.Context(), &penguinv1.SetMemberRequest{ProjectId: args[0], UserId: args[1], Role: r})
			return err
		}}
	add.Flags().StringVar(&role, "role", "member", "member or owner")
	mustComplete(add, "role", completeWords("member", "owner"))
	return teamGroup("projects", "list, create and delete projects, and manage their members",
		&cobra.Command{Use: "list", Short: "list your projects with your role", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			t := tc(c)
			resp, err := t.projects().ListProjects(c.Context(), &penguinv1.ListProjectsRequest{})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(t.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROJECT\tNAME\tROLE\tCREATED")
			for _, p := range resp.GetProjects() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.GetProjectId(), p.GetName(), roleWord(p.GetRole()), when(p.GetCreatedAt()))
			}
			return tw.Flush()
		}},
		create,
		&cobra.Command{Use: "delete PROJECT", Short: "delete a project without sessions (owners)", Args: nArgs("penguin projects delete PROJECT", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			_, err := tc(c).projects().DeleteProject(c.Context(), &penguinv1.DeleteProjectRequest{ProjectId: args[0]})
			return err
		}},
		&cobra.Command{Use: "members PROJECT", Short: "list a project's members", Args: nArgs("penguin projects members PROJECT", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			t := tc(c)
			resp, err := t.projects().ListMembers(c.Context(), &penguinv1.ListMembersRequest{ProjectId: args[0]})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(t.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tROLE\tSINCE")
			for _, m := range resp.GetMembers() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", m.GetUserId(), roleWord(m.GetRole()), when(m.GetCreatedAt()))
			}
			return tw.Flush()
		}},
		add,
		&cobra.Command{Use: "remove-member PROJECT USER", Short: "remove a member (owners; the last owner stays)", Args: nArgs("penguin projects remove-member PROJECT USER", 2, 2), RunE: func(c *cobra.Command, args []string) error {
			_, err := tc(c).projects().RemoveMember(c.Context(), &penguinv1.RemoveMemberRequest{ProjectId: args[0], UserId: args[1]})
			return err
		}},
	)
}

// newTokensCmd builds `penguin tokens`.
func newTokensCmd() *cobra.Command {
	var readOnly bool
	var ttl time.Duration
	create := &cobra.Command{Use: "create NAME", Short: "create a personal access token; its secret is printed once", Args: nArgs("penguin tokens create NAME [--read-only] [--ttl 720h]", 1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			t := tc(c)
			scope := penguinv1.TokenScope_TOKEN_SCOPE_FULL
			if readOnly {
				scope = penguinv1.TokenScope_TOKEN_SCOPE_READ
			}
			resp, err := t.tokens().CreateToken(c.Context(), &penguinv1.CreateTokenRequest{Name: args[0], Scope: scope, TtlSeconds: int64(ttl / time.Second)})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.ErrOrStderr(), "Token %s lasts until %s. Its secret follows; it is shown this once:\n",
				resp.GetToken().GetTokenId(), when(resp.GetToken().GetExpiresAt()))
			fmt.Fprintln(t.out, resp.GetSecret())
			return nil
		}}
	create.Flags().BoolVar(&readOnly, "read-only", false, "the token reads only: it creates, runs, steers and deletes nothing")
	create.Flags().DurationVar(&ttl, "ttl", 0, "how long the token lasts (default 90 days, at most 366 days)")
	return teamGroup("tokens", "list, create and revoke your personal access tokens",
		&cobra.Command{Use: "list", Short: "list your tokens (never their secrets)", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			t := tc(c)
			resp, err := t.tokens().ListTokens(c.Context(), &penguinv1.ListTokensRequest{})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(t.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOKEN\tNAME\tSCOPE\tCREATED\tEXPIRES\tLAST USED")
			for _, k := range resp.GetTokens() {
				scope := strings.ToLower(strings.TrimPrefix(k.GetScope().String(), "TOKEN_SCOPE_"))
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.GetTokenId(), k.GetName(), scope, when(k.GetCreatedAt()), when(k.GetExpiresAt()), when(k.GetLastUsedAt()))
			}
			return tw.Flush()
		}},
		create,
		&cobra.Command{Use: "revoke TOKEN", Short: "revoke one of your tokens by its id", Args: nArgs("penguin tokens revoke TOKEN", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			_, err := tc(c).tokens().RevokeToken(c.Context(), &penguinv1.RevokeTokenRequest{TokenId: args[0]})
			return err
		}},
	)
}

// newAuditCmd builds `penguin audit`: a page of a project's audit log
// (its owners), or of the global one (admins).
func newAuditCmd() *cobra.Command {
	var (
		project string
		limit   int32
		before  int64
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "read the audit log of a project you own (--project), or the global one (admins)",
		Long: `audit prints the newest records of the audit log, newest first: who did what,
when, to what. With --project, the project's log (its owners may read it);
without, the global log of sign-ins, accounts, tokens and global provider
routes (admins may read it). --before pages back: give the smallest ID printed.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			t := tc(c)
			resp, err := t.projects().ListAudit(c.Context(), &penguinv1.ListAuditRequest{ProjectId: project, BeforeId: before, Limit: limit})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(t.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tWHEN\tWHO\tACTION\tTARGET\tDETAIL")
			for _, r := range resp.GetRecords() {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.GetId(), when(r.GetAt()), orDash(r.GetActor()), r.GetAction(), orDash(r.GetTarget()), r.GetDetail())
			}
			return tw.Flush()
		},
	}
	fs := cmd.Flags()
	cf := addClientFlags(fs)
	cf.embedded.llmOptional = true
	fs.StringVar(&project, "project", "", "the project whose log to read (default: the global log)")
	fs.Int32Var(&limit, "limit", 0, "at most this many records (default 100)")
	fs.Int64Var(&before, "before", 0, "only records with an ID below this one")
	withTeamConn(cf, "audit", cmd)
	return cmd
}
