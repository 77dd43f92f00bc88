package httpapi

import (
	"crypto/rand"
	"net/http"
	"strings"
	"sync"

	"parley"
	"parley/auth"
	"parley/internal/edge"
)

// authResponse is the answer of signup and login.
type authResponse struct {
	User  *parley.User `json:"user"`
	Token string       `json:"token"`
}

// dummyHash is verified against for logins with unknown emails, so that
// they take as long as logins with a wrong password and timing does not
// reveal which emails have accounts.
var dummyHash = sync.OnceValue(func() string {
	h, err := auth.HashPassword(rand.Text())
	if err != nil {
		panic("httpapi: hash dummy password: " + err.Error())
	}
	return h
})

func (s *Server) signup(w http.ResponseWriter, r *http.Request, _ *caller) error {
	if err := s.rl.allow(s.now(), TierAuth, limitCheck{s.rl.signupIP, edge.IPKey(s.clientIP(r)), "signup_ip"}); err != nil {
		return err
	}
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Name     string `json:"name"`
		Handle   string `json:"handle"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	// Cheap checks first, so that bad input costs no password hashing; the
	// store checks again inside its transaction.
	email, err := parley.NormalizeEmail(in.Email)
	if err != nil {
		return err
	}
	if err := parley.ValidatePassword(in.Password); err != nil {
		return err
	}
	if err := parley.ValidateHandle(in.Handle); err != nil {
		return err
	}
	if err := parley.ValidateName("name", in.Name); err != nil {
		return err
	}
	hash, err := auth.HashPassword(in.Password)
	if err != nil {
		return err
	}
	u, err := s.store.CreateUser(r.Context(), parley.NewUser{
		Email: email, Name: in.Name, Handle: in.Handle, PasswordHash: hash,
	})
	if err != nil {
		return err
	}
	token, err := s.newSession(r, u.ID)
	if err != nil {
		return err
	}
	s.setDeviceCookie(w, r, u, hash)
	writeJSON(w, http.StatusCreated, authResponse{User: u, Token: token})
	return nil
}

// errBadCredentials is the one answer to every failed login, whatever failed.
var errBadCredentials = parley.Errorf(parley.EUNAUTHORIZED, "invalid email or password")

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ *caller) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	email, err := parley.NormalizeEmail(in.Email)
	if err != nil {
		email = strings.ToLower(strings.TrimSpace(in.Email))
	}
	// Every attempt counts, successful or not: the limits bound guessing
	// (login.go).
	cred, err := s.loginLimits(r, email)
	if err != nil {
		return err
	}
	if cred == nil {
		u, hash, err := s.store.UserCredentials(r.Context(), email)
		cred = &credentials{u, hash, err}
	}
	u, hash, err := cred.user, cred.hash, cred.err
	switch parley.ErrorCode(err) {
	case "":
	case parley.ENOTFOUND, parley.EINVALID:
		auth.VerifyPassword(dummyHash(), in.Password)
		return errBadCredentials
	default:
		return err
	}
	if hash == "" { // an imported account nobody has claimed yet (docs/import.md)
		auth.VerifyPassword(dummyHash(), in.Password)
		return errBadCredentials
	}
	ok, err := auth.VerifyPassword(hash, in.Password)
	if err != nil {
		return err
	}
	if !ok {
		return errBadCredentials
	}
	if u.Deactivated {
		// Said only to someone who knows the password (docs/lifecycle.md).
		return parley.Errorf(parley.EFORBIDDEN, "this account is deactivated; ask a workspace admin to reactivate it")
	}
	token, err := s.newSession(r, u.ID)
	if err != nil {
		return err
	}
	s.setDeviceCookie(w, r, u, hash)
	writeJSON(w, http.StatusOK, authResponse{User: u, Token: token})
	return nil
}

// newSession stores a session for userID and returns its bearer token.
func (s *Server) newSession(r *http.Request, userID string) (string, error) {
	token, hash, err := auth.NewToken()
	if err != nil {
		return "", err
	}
	now := s.now()
	err = s.store.CreateSession(r.Context(), parley.Session{
		TokenHash: hash, UserID: userID, CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL),
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.store.RevokeSession(r.Context(), c.TokenHash); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) getMe(w http.ResponseWriter, r *http.Request, c *caller) error {
	u, err := s.store.GetMe(r.Context(), c.UserID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) updateMe(w http.ResponseWriter, r *http.Request, c *caller) error {
	var p parley.UserPatch
	if err := decode(r, &p, false); err != nil {
		return err
	}
	u, err := s.store.UpdateMe(r.Context(), c.UserID, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) setStatus(w http.ResponseWriter, r *http.Request, c *caller) error {
	var st parley.Status
	if err := decode(r, &st, false); err != nil {
		return err
	}
	u, err := s.store.SetStatus(r.Context(), c.UserID, st)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) usersBatch(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		IDs []string `json:"ids"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if len(in.IDs) > parley.MaxBatchUsers {
		return parley.Errorf(parley.EINVALID, "at most %d ids per batch", parley.MaxBatchUsers)
	}
	users, err := s.dir.UsersBatch(r.Context(), c.UserID, in.IDs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, usersList{Users: nonNil(users)})
	return nil
}

type usersList struct {
	Users []parley.User `json:"users"`
}

// nonNil makes empty lists encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
