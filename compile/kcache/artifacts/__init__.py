"""What is stored: bundles (bundle_io), Inductor's ISA probes shared as one
more entry (isa_probes), restored regions compared with eager on first use
(verify_first_use), kernels rebuilt after a restore (binary_misses)."""
