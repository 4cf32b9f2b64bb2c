// Package importrule holds the test that keeps the services' insides
// private: no package under internal/, cmd/ or e2e/ imports a package
// below a service's folder (services/<service>/<anything>), except the
// composition root (internal/assemble) and the exceptions its test lists
// with their reasons. A service's root package is its face (its Setup);
// what lies below it may change without its clients knowing.
package importrule
