package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// The ownership model's records (store.Teams).

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func mustUser(t *testing.T, ctx context.Context, st store.Store, id string) *store.User {
	t.Helper()
	u := &store.User{ID: id, Name: "User " + id, PasswordHash: "hash-of-" + id}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatalf("CreateUser(%s): %v", id, err)
	}
	return u
}

func mustProject(t *testing.T, ctx context.Context, st store.Store, id, owner string) {
	t.Helper()
	if err := st.CreateProject(ctx, &store.Project{ID: id, Name: "Project " + id}, owner); err != nil {
		t.Fatalf("CreateProject(%s): %v", id, err)
	}
}

// testSeeded: a new store holds the user admin, owner of the default
// project, and sessions created without a project land in it.
func (s *suite) testSeeded(t *testing.T, ctx context.Context, st store.Store) {
	u, err := st.GetUser(ctx, store.AdminUser)
	if err != nil {
		t.Fatalf("GetUser(admin): %v", err)
	}
	if !u.Admin || u.Disabled || u.PasswordHash != "" {
		t.Fatalf("seeded admin = %+v; want an enabled admin without a password", u)
	}
	m, err := st.GetMember(ctx, store.DefaultProject, store.AdminUser)
	if err != nil || m.Role != store.RoleOwner {
		t.Fatalf("GetMember(default, admin) = %+v, %v; want owner", m, err)
	}
	sess := &store.Session{ID: "no-project"}
	mustCreate(t, ctx, st, sess)
	if sess.ProjectID != store.DefaultProject {
		t.Fatalf("CreateSession wrote back project %q; want %q", sess.ProjectID, store.DefaultProject)
	}
	got, err := st.GetSession(ctx, "no-project")
	if err != nil || got.ProjectID != store.DefaultProject {
		t.Fatalf("GetSession = %+v, %v; want project %q", got, err, store.DefaultProject)
	}
	// UpdateSession does not move a session.
	got.ProjectID = "elsewhere"
	if err := st.UpdateSession(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetSession(ctx, "no-project"); got.ProjectID != store.DefaultProject {
		t.Fatalf("UpdateSession moved the session to %q", got.ProjectID)
	}
}

func (s *suite) testUsers(t *testing.T, ctx context.Context, st store.Store) {
	u := mustUser(t, ctx, st, "alice")
	if u.CreatedAt.IsZero() {
		t.Fatal("CreateUser did not fill in CreatedAt")
	}
	wantErr(t, "CreateUser(alice again)", st.CreateUser(ctx, &store.User{ID: "alice"}), store.ErrConflict)
	for _, bad := range []string{"", "Alice", "a/b", "a b", "-x", string(make([]byte, 64))} {
		wantErr(t, "CreateUser("+bad+")", st.CreateUser(ctx, &store.User{ID: bad}), store.ErrInvalid)
	}
	u.Email, u.Disabled, u.FailedSignIns, u.OIDCSubject = "alice@example.test", true, 3, "sub-1"
	u.LockedUntil = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	if err := st.UpdateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got.Email != u.Email || !got.Disabled || got.FailedSignIns != 3 || !got.LockedUntil.Equal(u.LockedUntil) || got.PasswordHash != u.PasswordHash {
		t.Fatalf("GetUser after UpdateUser = %+v; want %+v", got, u)
	}
	if bySub, err := st.UserByOIDCSubject(ctx, "sub-1"); err != nil || bySub.ID != "alice" {
		t.Fatalf("UserByOIDCSubject = %v, %v", bySub, err)
	}
	_, err = st.UserByOIDCSubject(ctx, "sub-2")
	wantErr(t, "UserByOIDCSubject(unknown)", err, store.ErrNotFound)
	bob := mustUser(t, ctx, st, "bob")
	bob.OIDCSubject = "sub-1"
	wantErr(t, "UpdateUser(second user with the same subject)", st.UpdateUser(ctx, bob), store.ErrConflict)
	wantErr(t, "UpdateUser(unknown)", st.UpdateUser(ctx, &store.User{ID: "nobody"}), store.ErrNotFound)
	users, err := st.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range users {
		ids = append(ids, u.ID)
	}
	if !slices.Equal(ids, []string{store.AdminUser, "alice", "bob"}) {
		t.Fatalf("ListUsers = %v", ids)
	}
	_, err = st.GetUser(ctx, "nobody")
	wantErr(t, "GetUser(unknown)", err, store.ErrNotFound)
	wantErr(t, "DeleteUser(unknown)", st.DeleteUser(ctx, "nobody"), store.ErrNotFound)
}

// testSessionAccess: GetSessionAccess returns the row GetSession does,
// with the user's membership of its project when there is one.
func (s *suite) testSessionAccess(t *testing.T, ctx context.Context, st store.Store) {
	mustUser(t, ctx, st, "bob")
	mustUser(t, ctx, st, "carol")
	mustProject(t, ctx, st, "apollo", "bob")
	if err := st.SetMember(ctx, store.Member{ProjectID: "apollo", UserID: "carol", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	want := fullSession("s-apollo")
	want.ProjectID = "apollo"
	mustCreate(t, ctx, st, want)
	for _, tc := range []struct {
		user string
		role store.Role // empty: no member
	}{{"bob", store.RoleOwner}, {"carol", store.RoleMember}, {store.AdminUser, ""}, {"nobody", ""}} {
		got, m, err := st.GetSessionAccess(ctx, "s-apollo", tc.user)
		if err != nil {
			t.Fatalf("GetSessionAccess(%s): %v", tc.user, err)
		}
		if d := diffSession(want, got); d != "" {
			t.Fatalf("GetSessionAccess(%s) returned another row than was created: %s", tc.user, d)
		}
		switch {
		case tc.role == "" && m != nil:
			t.Fatalf("GetSessionAccess(%s) membership = %+v; want none", tc.user, m)
		case tc.role != "" && m == nil:
			t.Fatalf("GetSessionAccess(%s) found no membership; want %s", tc.user, tc.role)
		case tc.role != "":
			have, err := st.GetMember(ctx, "apollo", tc.user)
			if err != nil {
				t.Fatal(err)
			}
			if *m != have {
				t.Fatalf("GetSessionAccess(%s) membership = %+v; GetMember says %+v", tc.user, m, have)
			}
		}
	}
	_, _, err := st.GetSessionAccess(ctx, "s-none", "bob")
	wantErr(t, "GetSessionAccess(unknown)", err, store.ErrNotFound)
}

// ReadForNewSession reads, as they stand, the caller's memberships (as
// MembershipsOf does), the version of the agent asked for (zero for an
// agent the store lacks) and the model's settings in the query's project
// and the caller's projects, not in others; a part not asked for is not
// read.
func (s *suite) testReadForNewSession(t *testing.T, ctx context.Context, st store.Store) {
	mustUser(t, ctx, st, "bob")
	mustUser(t, ctx, st, "carol")
	mustProject(t, ctx, st, "apollo", "bob")
	mustProject(t, ctx, st, "gemini", "carol")
	if err := st.SetMember(ctx, store.Member{ProjectID: "gemini", UserID: "bob", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	mustProject(t, ctx, st, "mercury", "carol")
	for _, p := range []string{"apollo", "mercury", store.DefaultProject} {
		price := &store.Price{Input: 1, Output: 2}
		if p == store.DefaultProject {
			price = nil
		}
		if err := st.PutModelSetting(ctx, &store.ModelSetting{Project: p, Provider: "prov", ModelID: "m1", ContextWindow: int64(len(p)) * 1000, Price: price}); err != nil {
			t.Fatal(err)
		}
	}
	agent := store.AgentRef{Project: "apollo", Name: "reader"}
	q := store.NewSessionQuery{UserID: "bob", Agent: agent, Provider: "prov", ModelID: "m1", Project: store.DefaultProject}
	r, err := st.ReadForNewSession(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	of, err := st.MembershipsOf(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(r.Memberships, func(a, b store.Member) int { return strings.Compare(a.ProjectID, b.ProjectID) })
	if !slices.Equal(r.Memberships, of) || len(of) != 2 {
		t.Fatalf("ReadForNewSession memberships = %+v; MembershipsOf says %+v", r.Memberships, of)
	}
	if !r.AgentRead || r.Agent != agent || r.AgentVersion != 0 {
		t.Fatalf("ReadForNewSession of an agent the store lacks = %+v; want it read at version 0", r)
	}
	for _, tc := range []struct {
		project, provider, model string
		window                   int64 // 0: none
		read                     bool
	}{
		{"apollo", "prov", "m1", 6000, true},             // a project of the caller
		{"gemini", "prov", "m1", 0, true},                // a project of the caller without settings
		{store.DefaultProject, "prov", "m1", 7000, true}, // the query's project
		{"mercury", "prov", "m1", 0, false},              // not the caller's: not read
		{"apollo", "prov", "m2", 0, false},               // another model: not read
		{"apollo", "other", "m1", 0, false},              // another provider: not read
	} {
		pm, ok := r.ModelSetting(tc.project, tc.provider, tc.model)
		switch {
		case ok != tc.read:
			t.Fatalf("ModelSetting(%s, %s/%s) read = %v, want %v", tc.project, tc.provider, tc.model, ok, tc.read)
		case tc.window == 0 && pm != nil:
			t.Fatalf("ModelSetting(%s, %s/%s) = %+v, want none", tc.project, tc.provider, tc.model, pm)
		case tc.window != 0:
			want, err := st.GetModelSetting(ctx, tc.project, tc.provider, tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if pm == nil || pm.ContextWindow != tc.window || !reflect.DeepEqual(pm, want) {
				t.Fatalf("ModelSetting(%s, %s/%s) = %+v, want %+v", tc.project, tc.provider, tc.model, pm, want)
			}
		}
	}
	if as, ok := st.(store.AgentStore); ok {
		if _, err := as.CreateAgent(ctx, agent.Project, agent.Name, []store.AgentFile{{Path: "AGENTS.md", Data: []byte("a")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := as.ChangeAgent(ctx, agent.Project, agent.Name, []store.AgentChange{{Path: "AGENTS.md", Data: []byte("b"), IfVersion: store.AnyVersion}}); err != nil {
			t.Fatal(err)
		}
		if r, err := st.ReadForNewSession(ctx, q); err != nil || !r.AgentRead || r.AgentVersion != 2 {
			t.Fatalf("ReadForNewSession of the agent at version 2 = %+v, %v", r, err)
		}
	}
	// A removed membership is gone from the next read.
	if err := st.RemoveMember(ctx, "gemini", "bob"); err != nil {
		t.Fatal(err)
	}
	if r, err := st.ReadForNewSession(ctx, q); err != nil || len(r.Memberships) != 1 || r.Memberships[0].ProjectID != "apollo" {
		t.Fatalf("ReadForNewSession after bob left gemini = %+v, %v", r, err)
	}
	// Nothing asked for, nothing read.
	r, err = st.ReadForNewSession(ctx, store.NewSessionQuery{Project: "apollo"})
	if err != nil || len(r.Memberships) != 0 || r.AgentRead {
		t.Fatalf("ReadForNewSession of nothing = %+v, %v", r, err)
	}
	if _, ok := r.ModelSetting("apollo", "prov", "m1"); ok {
		t.Fatal("ReadForNewSession without a model read its settings")
	}
}

func (s *suite) testProjectsAndMembers(t *testing.T, ctx context.Context, st store.Store) {
	mustUser(t, ctx, st, "alice")
	mustUser(t, ctx, st, "bob")
	mustProject(t, ctx, st, "apollo", "alice")
	wantErr(t, "CreateProject(apollo again)", st.CreateProject(ctx, &store.Project{ID: "apollo"}, "bob"), store.ErrConflict)
	wantErr(t, "CreateProject(owner unknown)", st.CreateProject(ctx, &store.Project{ID: "gemini"}, "nobody"), store.ErrNotFound)
	if _, err := st.GetProject(ctx, "gemini"); err == nil {
		t.Fatal("a project whose owner was refused was created anyway")
	}
	wantErr(t, "CreateProject(bad id)", st.CreateProject(ctx, &store.Project{ID: "Bad Id"}, "alice"), store.ErrInvalid)

	if err := st.SetMember(ctx, store.Member{ProjectID: "apollo", UserID: "bob", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetMember(bad role)", st.SetMember(ctx, store.Member{ProjectID: "apollo", UserID: "bob", Role: "boss"}), store.ErrInvalid)
	wantErr(t, "SetMember(unknown user)", st.SetMember(ctx, store.Member{ProjectID: "apollo", UserID: "nobody", Role: store.RoleMember}), store.ErrNotFound)
	wantErr(t, "SetMember(unknown project)", st.SetMember(ctx, store.Member{ProjectID: "nothing", UserID: "bob", Role: store.RoleMember}), store.ErrNotFound)
	members, err := st.ListMembers(ctx, "apollo")
	if err != nil || len(members) != 2 || members[0].UserID != "alice" || members[0].Role != store.RoleOwner || members[1].Role != store.RoleMember {
		t.Fatalf("ListMembers = %+v, %v", members, err)
	}
	// Setting a member again changes the role.
	if err := st.SetMember(ctx, store.Member{ProjectID: "apollo", UserID: "bob", Role: store.RoleOwner}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetMember(ctx, "apollo", "bob"); err != nil || m.Role != store.RoleOwner {
		t.Fatalf("GetMember after the change = %+v, %v", m, err)
	}
	of, err := st.MembershipsOf(ctx, "alice")
	if err != nil || len(of) != 1 || of[0].ProjectID != "apollo" {
		t.Fatalf("MembershipsOf(alice) = %+v, %v", of, err)
	}
	if err := st.RemoveMember(ctx, "apollo", "bob"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "RemoveMember(again)", st.RemoveMember(ctx, "apollo", "bob"), store.ErrNotFound)
	_, err = st.GetMember(ctx, "apollo", "bob")
	wantErr(t, "GetMember(removed)", err, store.ErrNotFound)

	// A project with sessions is not deleted.
	mustCreate(t, ctx, st, &store.Session{ID: "in-apollo", ProjectID: "apollo"})
	wantErr(t, "DeleteProject(with a session)", st.DeleteProject(ctx, "apollo"), store.ErrConflict)
	if err := st.DeleteSession(ctx, "in-apollo"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteProject(ctx, "apollo"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteProject(again)", st.DeleteProject(ctx, "apollo"), store.ErrNotFound)
	if of, err := st.MembershipsOf(ctx, "alice"); err != nil || len(of) != 0 {
		t.Fatalf("memberships of a deleted project remain: %+v, %v", of, err)
	}
	projects, err := st.ListProjects(ctx)
	if err != nil || len(projects) != 1 || projects[0].ID != store.DefaultProject {
		t.Fatalf("ListProjects = %+v, %v", projects, err)
	}
}

func (s *suite) testListByProject(t *testing.T, ctx context.Context, st store.Store) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []string{"a", "b", "a", "c", "a", "b"} {
		mustCreate(t, ctx, st, &store.Session{ID: p + "-" + string(rune('0'+i)), ProjectID: p, CreatedAt: base.Add(time.Duration(i) * time.Minute)})
	}
	collect := func(projects ...string) []string {
		var ids []string
		token := ""
		for {
			page, next, err := st.ListSessions(ctx, 2, token, projects...)
			if err != nil {
				t.Fatalf("ListSessions(%v): %v", projects, err)
			}
			ids = append(ids, idsOf(page)...)
			if next == "" {
				return ids
			}
			token = next
		}
	}
	if got := collect("a"); !slices.Equal(got, []string{"a-4", "a-2", "a-0"}) {
		t.Fatalf("project a: %v", got)
	}
	if got := collect("b", "c"); !slices.Equal(got, []string{"b-5", "c-3", "b-1"}) {
		t.Fatalf("projects b and c: %v", got)
	}
	if got := collect([]string{}...); len(got) != 0 {
		t.Fatalf("no project: %v; want none", got)
	}
	if got := collect(); len(got) != 6 {
		t.Fatalf("every project: %v", got)
	}
}

func (s *suite) testAccessTokens(t *testing.T, ctx context.Context, st store.Store) {
	mustUser(t, ctx, st, "alice")
	mustUser(t, ctx, st, "bob")
	exp := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	tk := &store.AccessToken{ID: "tok1", UserID: "alice", Name: "ci", Digest: digest("secret-1"), Scope: store.ScopeRead, ExpiresAt: exp}
	if err := st.CreateAccessToken(ctx, tk); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CreateAccessToken(same digest)", st.CreateAccessToken(ctx,
		&store.AccessToken{ID: "tok2", UserID: "bob", Digest: digest("secret-1"), Scope: store.ScopeFull}), store.ErrConflict)
	wantErr(t, "CreateAccessToken(bad scope)", st.CreateAccessToken(ctx,
		&store.AccessToken{ID: "tok3", UserID: "bob", Digest: digest("x"), Scope: "root"}), store.ErrInvalid)
	wantErr(t, "CreateAccessToken(unknown user)", st.CreateAccessToken(ctx,
		&store.AccessToken{ID: "tok4", UserID: "nobody", Digest: digest("y"), Scope: store.ScopeFull}), store.ErrNotFound)
	got, err := st.AccessTokenByDigest(ctx, digest("secret-1"))
	if err != nil || got.ID != "tok1" || got.UserID != "alice" || got.Scope != store.ScopeRead || !got.ExpiresAt.Equal(exp) || !bytes.Equal(got.Digest, digest("secret-1")) {
		t.Fatalf("AccessTokenByDigest = %+v, %v", got, err)
	}
	_, err = st.AccessTokenByDigest(ctx, digest("secret-2"))
	wantErr(t, "AccessTokenByDigest(unknown)", err, store.ErrNotFound)
	if err := st.TouchAccessToken(ctx, "tok1"); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListAccessTokens(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].LastUsedAt.IsZero() {
		t.Fatalf("ListAccessTokens = %+v, %v", list, err)
	}
	// Bob cannot revoke Alice's token.
	wantErr(t, "DeleteAccessToken(another user's)", st.DeleteAccessToken(ctx, "bob", "tok1"), store.ErrNotFound)
	if err := st.DeleteAccessToken(ctx, "alice", "tok1"); err != nil {
		t.Fatal(err)
	}
	_, err = st.AccessTokenByDigest(ctx, digest("secret-1"))
	wantErr(t, "AccessTokenByDigest(revoked)", err, store.ErrNotFound)
}

func (s *suite) testLoginSessions(t *testing.T, ctx context.Context, st store.Store) {
	mustUser(t, ctx, st, "alice")
	exp := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	for _, d := range []string{"s1", "s2"} {
		if err := st.CreateLoginSession(ctx, &store.LoginSession{Digest: digest(d), UserID: "alice", ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.LoginSessionByDigest(ctx, digest("s1"))
	if err != nil || got.UserID != "alice" || !got.ExpiresAt.Equal(exp) {
		t.Fatalf("LoginSessionByDigest = %+v, %v", got, err)
	}
	if err := st.DeleteLoginSession(ctx, digest("s1")); err != nil {
		t.Fatal(err)
	}
	_, err = st.LoginSessionByDigest(ctx, digest("s1"))
	wantErr(t, "LoginSessionByDigest(ended)", err, store.ErrNotFound)
	if err := st.DeleteLoginSession(ctx, digest("s1")); err != nil {
		t.Fatalf("ending an ended sign-in: %v", err)
	}
	if err := st.DeleteLoginSessionsOf(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = st.LoginSessionByDigest(ctx, digest("s2"))
	wantErr(t, "LoginSessionByDigest(after DeleteLoginSessionsOf)", err, store.ErrNotFound)
}

func (s *suite) testDeleteUserCascades(t *testing.T, ctx context.Context, st store.Store) {
	mustUser(t, ctx, st, "alice")
	if err := st.SetMember(ctx, store.Member{ProjectID: store.DefaultProject, UserID: "alice", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAccessToken(ctx, &store.AccessToken{ID: "t", UserID: "alice", Digest: digest("t"), Scope: store.ScopeFull}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateLoginSession(ctx, &store.LoginSession{Digest: digest("l"), UserID: "alice", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err := st.GetMember(ctx, store.DefaultProject, "alice")
	wantErr(t, "membership of a deleted user", err, store.ErrNotFound)
	_, err = st.AccessTokenByDigest(ctx, digest("t"))
	wantErr(t, "token of a deleted user", err, store.ErrNotFound)
	_, err = st.LoginSessionByDigest(ctx, digest("l"))
	wantErr(t, "sign-in of a deleted user", err, store.ErrNotFound)
}

func (s *suite) testAudit(t *testing.T, ctx context.Context, st store.Store) {
	for i, r := range []store.AuditRecord{
		{Actor: "alice", ProjectID: "p", Action: "session.delete", Target: "s1"},
		{Actor: "bob", ProjectID: "q", Action: "session.delete", Target: "s2"},
		{Actor: "alice", ProjectID: "p", Action: "member.add", Target: "bob", Detail: "role member"},
		{Actor: "alice", Action: "sign_in"},
	} {
		if err := st.AppendAudit(ctx, r); err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
	}
	wantErr(t, "AppendAudit(no action)", st.AppendAudit(ctx, store.AuditRecord{Actor: "x"}), store.ErrInvalid)
	got, err := st.ListAudit(ctx, "p", 0, 0)
	if err != nil || len(got) != 2 || got[0].Action != "member.add" || got[0].Detail != "role member" || got[1].Target != "s1" || got[0].At.IsZero() {
		t.Fatalf("ListAudit(p) = %+v, %v", got, err)
	}
	older, err := st.ListAudit(ctx, "p", got[0].ID, 10)
	if err != nil || len(older) != 1 || older[0].ID != got[1].ID {
		t.Fatalf("ListAudit(p, before %d) = %+v, %v", got[0].ID, older, err)
	}
	account, err := st.ListAudit(ctx, "", 0, 0)
	if err != nil || len(account) != 1 || account[0].Action != "sign_in" {
		t.Fatalf("ListAudit(accounts) = %+v, %v", account, err)
	}

	// Retention: by age, then by count.
	if err := st.AppendAudit(ctx, store.AuditRecord{Actor: "alice", ProjectID: "p", Action: "old", At: time.Now().Add(-48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PruneAudit(ctx, 0, time.Now().Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("PruneAudit(older than a day) = %d, %v; want the one old record", n, err)
	}
	if n, err := st.PruneAudit(ctx, 10, time.Time{}); err != nil || n != 0 {
		t.Fatalf("PruneAudit(keep 10 of 4) = %d, %v; want none", n, err)
	}
	if n, err := st.PruneAudit(ctx, 2, time.Time{}); err != nil || n != 2 {
		t.Fatalf("PruneAudit(keep 2 of 4) = %d, %v", n, err)
	}
	left, err := st.ListAudit(ctx, "p", 0, 0)
	if err != nil || len(left) != 1 || left[0].Action != "member.add" {
		t.Fatalf("after pruning, project p's log = %+v, %v; want the newest of it", left, err)
	}
}

func (s *suite) testSignInStates(t *testing.T, ctx context.Context, st store.Store) {
	future := time.Now().Add(10 * time.Minute)
	in := &store.SignInState{StateDigest: digest("state-1"), BindingDigest: digest("browser-1"), Nonce: "n1", Verifier: "v1", ExpiresAt: future}
	if err := st.CreateSignInState(ctx, in, 2); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CreateSignInState(same state)", st.CreateSignInState(ctx, in, 10), store.ErrConflict)
	wantErr(t, "CreateSignInState(no binding)", st.CreateSignInState(ctx, &store.SignInState{StateDigest: digest("x"), ExpiresAt: future}, 10), store.ErrInvalid)
	// An expired one is deleted by the next start, and does not count.
	old := &store.SignInState{StateDigest: digest("state-old"), BindingDigest: digest("b"), ExpiresAt: time.Now().Add(-time.Minute)}
	if err := st.CreateSignInState(ctx, old, 10); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSignInState(ctx, &store.SignInState{StateDigest: digest("state-2"), BindingDigest: digest("b"), ExpiresAt: future}, 2); err != nil {
		t.Fatalf("a start beside one open and one expired, two allowed: %v", err)
	}
	_, err := st.TakeSignInState(ctx, digest("state-old"))
	wantErr(t, "TakeSignInState(expired, deleted)", err, store.ErrNotFound)
	wantErr(t, "CreateSignInState(over the bound)", st.CreateSignInState(ctx, &store.SignInState{StateDigest: digest("state-3"), BindingDigest: digest("b"), ExpiresAt: future}, 2), store.ErrConflict)

	got, err := st.TakeSignInState(ctx, digest("state-1"))
	if err != nil || !bytes.Equal(got.BindingDigest, digest("browser-1")) || got.Nonce != "n1" || got.Verifier != "v1" || !got.ExpiresAt.Equal(future.Truncate(time.Microsecond)) {
		t.Fatalf("TakeSignInState = %+v, %v", got, err)
	}
	_, err = st.TakeSignInState(ctx, digest("state-1"))
	wantErr(t, "TakeSignInState(taken already)", err, store.ErrNotFound)

	// A command-line client's sign-in keeps where it listens; peeking
	// leaves it to be taken.
	cli := &store.SignInState{StateDigest: digest("state-cli"), BindingDigest: digest("cli"), Loopback: "http://127.0.0.1:4711/callback", ExpiresAt: future}
	if err := st.CreateSignInState(ctx, cli, 10); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"PeekSignInState", "TakeSignInState"} {
		get := st.PeekSignInState
		if what == "TakeSignInState" {
			get = st.TakeSignInState
		}
		if got, err := get(ctx, digest("state-cli")); err != nil || got.Loopback != cli.Loopback || !bytes.Equal(got.BindingDigest, digest("cli")) {
			t.Fatalf("%s = %+v, %v; want the loopback sign-in", what, got, err)
		}
	}
	_, err = st.PeekSignInState(ctx, digest("state-cli"))
	wantErr(t, "PeekSignInState(taken already)", err, store.ErrNotFound)
}
