package access

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// ExternalIdentity is a person an identity provider vouched for, after
// the provider's checks (package oidclogin): their email is verified and
// the allow-lists admitted them.
type ExternalIdentity struct {
	// Subject names the person at the provider, for good: the issuer and
	// the provider's "sub", separated by a space. Accounts are matched by
	// it, never by email, which a provider may reassign.
	Subject string
	// Email, Name and Username (the provider's preferred user name) fill
	// in a new account and keep an existing one's up to date.
	Email, Name, Username string
	// Admin, when not nil, is the admin role the provider's groups give.
	Admin *bool
	// How names the provider in the audit log.
	How string
}

// maxIDTries bounds the user ids tried for a new account whose preferred
// id is taken.
const maxIDTries = 50

// SignInExternal signs in the person an identity provider vouched for:
// the account linked to their subject, or a new one (member of no project
// until an owner adds them). It returns the login session's secret, its
// end and the account.
func (g *Guard) SignInExternal(ctx context.Context, id *ExternalIdentity) (string, time.Time, *store.User, error) {
	u, err := g.st.UserByOIDCSubject(ctx, id.Subject)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if u, err = g.createExternal(ctx, id); err != nil {
			return "", time.Time{}, nil, err
		}
	case err != nil:
		return "", time.Time{}, nil, storeStatus(err)
	default:
		if u.Disabled {
			g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "sign_in.failed", Detail: id.How + ": account disabled"})
			return "", time.Time{}, nil, status.Error(codes.PermissionDenied, "this account is disabled; ask an admin")
		}
		changed := u.Email != id.Email || (id.Name != "" && u.Name != id.Name) || (id.Admin != nil && u.Admin != *id.Admin)
		if changed {
			if id.Admin != nil && u.Admin != *id.Admin {
				g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "user.admin_from_provider", Target: u.ID, Detail: fmt.Sprintf("admin %t", *id.Admin)})
				u.Admin = *id.Admin
			}
			u.Email = id.Email
			if id.Name != "" {
				u.Name = id.Name
			}
			if err := g.st.UpdateUser(ctx, u); err != nil {
				return "", time.Time{}, nil, storeStatus(err)
			}
		}
	}
	secret, expires, err := g.StartLoginSession(ctx, u.ID, id.How)
	if err != nil {
		return "", time.Time{}, nil, err
	}
	return secret, expires, u, nil
}

// createExternal creates the account of a person's first sign-in, with
// the first free id among their preferred user name (up to an '@'), their
// email's local part and those with a number appended.
func (g *Guard) createExternal(ctx context.Context, id *ExternalIdentity) (*store.User, error) {
	base := userIDFrom(strings.Split(id.Username, "@")[0])
	if base == "" {
		base = userIDFrom(strings.Split(id.Email, "@")[0])
	}
	if base == "" {
		base = "user"
	}
	u := &store.User{Name: id.Name, Email: id.Email, OIDCSubject: id.Subject, Admin: id.Admin != nil && *id.Admin}
	for i := 1; i <= maxIDTries; i++ {
		u.ID = base
		if i > 1 {
			u.ID = fmt.Sprintf("%s-%d", base[:min(len(base), 58)], i)
		}
		err := g.st.CreateUser(ctx, u)
		if err == nil {
			g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "user.create", Target: u.ID, Detail: fmt.Sprintf("first sign-in with %s, admin %t", id.How, u.Admin)})
			return u, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, storeStatus(err)
		}
		// The id is taken, or the subject was linked meanwhile by a
		// sign-in of the same person through another replica.
		if linked, err := g.st.UserByOIDCSubject(ctx, id.Subject); err == nil {
			return linked, nil
		}
	}
	return nil, status.Errorf(codes.AlreadyExists, "no free user id near %q; ask an admin", base)
}

// userIDFrom turns a name into a user id (store.CheckName): lower case,
// other characters as '-', at most 63; empty when nothing is left.
func userIDFrom(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	id := strings.TrimLeft(b.String(), "._-")
	if len(id) > 63 {
		id = id[:63]
	}
	if store.CheckName("user id", id) != nil {
		return ""
	}
	return id
}
