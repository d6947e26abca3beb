// Symbol visibility for libtensorops_client: everything is hidden except what
// carries TENSOROPS_EXPORT.
#ifndef TENSOROPS_CLIENT_EXPORT_H_
#define TENSOROPS_CLIENT_EXPORT_H_

#if defined(_WIN32)
#define TENSOROPS_EXPORT
#else
#define TENSOROPS_EXPORT __attribute__((visibility("default")))
#endif

#endif  // TENSOROPS_CLIENT_EXPORT_H_
