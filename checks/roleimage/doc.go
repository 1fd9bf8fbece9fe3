// Package roleimage tests images/role-image: every role's image holds
// exactly its static binary, its user's /etc/passwd and /etc/group, the
// CA bundle only if the role speaks TLS (units.TLS), mount points only,
// and nothing else; the build is reproducible (same bytes, same image ID);
// and the archive is one bxctl install accepts (pkg/host/imagearchive).
package roleimage
