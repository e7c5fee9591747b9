// Pseudo filesystems that carry no user data (or cannot be marked): the
// helper does not mark them, and the collector does not count them when they
// appear during a command. One list for both, included by each (the helper
// links no library of prov's).
&[
    b"proc",
    b"sysfs",
    b"devpts",
    b"devtmpfs",
    b"cgroup",
    b"cgroup2",
    b"securityfs",
    b"debugfs",
    b"tracefs",
    b"pstore",
    b"bpf",
    b"mqueue",
    b"configfs",
    b"fusectl",
    b"binfmt_misc",
    b"autofs",
    b"hugetlbfs",
    b"efivarfs",
    b"selinuxfs",
    b"nsfs",
    b"rpc_pipefs",
    b"nfsd",
]
