//! What `prov run` records, checked as a user would: through `prov query`.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use prov_e2e::*;

#[test]
fn reads_and_writes_are_attributed_with_correct_hashes() {
    check_hashes(&Case::new("hashes"), &[0, 1, 255, 256, 767, 768, 769, 4096, 21567, 101978]);
}

/// `cat in_SIZE > out_SIZE` for each size: one read and one write, the
/// documented partial hash, the command's text, cwd, user and status.
fn check_hashes(case: &Case, sizes: &[usize]) {
    for (i, &size) in sizes.iter().enumerate() {
        let data = content(size, i as u64 + 1);
        let input = case.write(format!("in_{size}"), &data);
        let script = format!("cat in_{size} > out_{size}");
        case.run_sh(&script);

        let cmd = case.writer_of(format!("out_{size}"));
        assert_eq!(cmd["text"], format!("sh -c '{script}'"));
        assert_eq!(cmd["exit_status"], 0);
        assert_eq!(cmd["user"], if case.who == As::Root { "root" } else { TEST_USER });
        assert_eq!(cmd["cwd"].as_str().unwrap().as_bytes(), case.work.as_os_str().as_bytes());
        assert_eq!(cmd["complete"], true, "{cmd:#}");
        assert!(cmd["start_ns"].as_i64().unwrap() <= cmd["end_ns"].as_i64().unwrap());
        let output = case.work.join(format!("out_{size}"));
        assert_eq!(
            files(&cmd),
            vec![("read".to_string(), bytes_of(&input)), ("write".to_string(), bytes_of(&output))],
            "size {size}: exactly one read of the input and one write of the output"
        );
        let want = expected_hash(&data, 256, 3);
        for f in cmd["files"].as_array().unwrap() {
            assert_eq!(f["hash"], want, "size {size}, {}", f["path"]);
            assert_eq!(f["size"], size as u64);
            assert_eq!(f["hash_chunk_size"], 256);
            assert_eq!(f["hash_chunks"], 3);
        }
        let mtime = std::fs::metadata(&output).unwrap();
        use std::os::unix::fs::MetadataExt;
        let write = &cmd["files"][1];
        assert_eq!(write["mtime_ns"], mtime.mtime() * 1_000_000_000 + mtime.mtime_nsec());
    }
}

#[test]
fn renamed_file_is_found_by_content() {
    check_rename(&Case::new("rename"));
}

fn check_rename(case: &Case) {
    case.write("data.csv", b"b\na\nc\n");
    case.run_sh("sort data.csv > sorted.csv");
    let before = case.writer_of("sorted.csv");
    std::fs::rename(case.work.join("sorted.csv"), case.work.join("elsewhere.csv")).unwrap();
    let after = case.writer_of("elsewhere.csv");
    assert_eq!(before["uuid"], after["uuid"]);
    let matched: Vec<_> = after["files"].as_array().unwrap().iter().filter(|f| f["matched"] == true).collect();
    assert_eq!(matched.len(), 1);
    assert_eq!(path_bytes(matched[0]), bytes_of(&case.work.join("sorted.csv")));
    // The reading side is found by content as well.
    std::fs::rename(case.work.join("data.csv"), case.work.join("input-moved.csv")).unwrap();
    let readers = case.query(["read", "input-moved.csv"]);
    assert_eq!(readers.len(), 1);
    assert_eq!(readers[0]["uuid"], before["uuid"]);
}

/// The headline scenario as a person reads it: `prov query wrote` without
/// --json shows the command, where and when it ran, how it ended, and its
/// files with size, mtime and hash; after a rename, the same command.
/// Files below the current directory are shown relative to it, as git shows
/// them; from elsewhere whole. (User, host, session and duration are in
/// --json, with absolute paths.)
#[test]
fn human_output_shows_the_command_and_its_files() {
    let case = Case::new("human");
    let data = b"b\na\nc\n";
    case.write("data.csv", data);
    case.run_sh("sort data.csv > sorted.csv");
    let human_in = |dir: &Path, file: &str| {
        // TZ=UTC: local times then read like the UTC ones of --json.
        let out = case
            .command(case.inst.prov())
            .env("TZ", "UTC")
            .current_dir(dir)
            .args(["query", "wrote", file])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let human = |file: &str| human_in(&case.work, file);
    let shown = human("sorted.csv");
    let cmd = case.writer_of("sorted.csv");
    let utc = |v: &serde_json::Value| v.as_str().unwrap()[..19].replace('T', " ");
    let hash_in = expected_hash(data, 256, 3);
    let hash_out = expected_hash(b"a\nb\nc\n", 256, 3);
    // One line for the command (id, start, status, directory from the home
    // directory on, text), its files below it.
    let mut expected = vec![
        format!(
            "{:<5} {}  ok        ~/work  sh -c 'sort data.csv > sorted.csv'",
            format!("#{}", cmd["id"]),
            utc(&cmd["start"]),
        ),
        "    wrote this file".to_string(),
    ];
    let mut whole = expected.clone();
    for f in cmd["files"].as_array().unwrap() {
        let (mark, access, hash) = match f["access"].as_str().unwrap() {
            "write" => ('*', "write", &hash_out),
            _ => (' ', "read ", &hash_in),
        };
        let path = f["path"].as_str().unwrap();
        let below_work = path.strip_prefix(&format!("{}/", case.work.display())).expect("a file of the work directory");
        expected.push(format!("    {mark} {access} {below_work}  6 B  {}  {hash}", utc(&f["mtime"])));
        whole.push(format!("    {mark} {access} {path}  6 B  {}  {hash}", utc(&f["mtime"])));
    }
    assert_eq!(cmd["files"].as_array().unwrap().len(), 2, "{cmd:#}");
    assert_eq!(shown, expected.join("\n") + "\n", "human output of `prov query wrote sorted.csv`");
    // From outside the work directory, whole paths.
    let sorted = case.work.join("sorted.csv");
    assert_eq!(human_in(Path::new("/"), sorted.to_str().unwrap()), whole.join("\n") + "\n");

    std::fs::rename(case.work.join("sorted.csv"), case.work.join("elsewhere.csv")).unwrap();
    let moved = "    wrote it as sorted.csv (moved since)";
    assert_eq!(human("elsewhere.csv"), shown.replace("    wrote this file", moved), "the same command, moved since");
}

#[test]
fn static_binary_writes_are_recorded() {
    let case = Case::new("static");
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.exists(), "busybox-static is needed (installed by tests/run)");
    // Static: no program interpreter, so no LD_PRELOAD or ld.so is involved.
    assert!(
        !has_program_interpreter(busybox),
        "/bin/busybox is dynamically linked: install busybox-static, not busybox"
    );
    assert!(has_program_interpreter(Path::new("/bin/sh")), "the ELF check sees the interpreter of a dynamic binary");
    let out = case.run(["/bin/busybox", "sh", "-c", "echo static > static.txt; /bin/busybox cp static.txt copy.txt"]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let cmd = case.writer_of("copy.txt");
    let paths = files(&cmd);
    assert!(paths.contains(&("write".into(), bytes_of(&case.work.join("static.txt")))), "{paths:?}");
    assert!(paths.contains(&("read".into(), bytes_of(&case.work.join("static.txt")))), "{paths:?}");
}

/// Whether an ELF64 little-endian executable has a PT_INTERP program header.
fn has_program_interpreter(path: &Path) -> bool {
    let elf = std::fs::read(path).unwrap();
    assert!(
        elf.len() >= 64 && elf.starts_with(b"\x7fELF") && elf[4] == 2 && elf[5] == 1,
        "{}: not ELF64 LE",
        path.display()
    );
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let o = phoff + i * phentsize;
        u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) == 3 // PT_INTERP
    })
}

/// Every mount of the namespace is marked, not only the one of the working
/// directory: a tmpfs mounted below it and /dev/shm.
#[test]
fn writes_on_every_mount_are_recorded() {
    let case = Case::new("mounts");
    let mnt = mount_tmpfs(&case.work.join("tmpfs"));
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let shm = Remove(format!("/dev/shm/prov-e2e-{}.txt", std::process::id()).into());
    let on_tmpfs = mnt.path.join("a.txt");
    case.run_sh(&format!("echo a > {}; echo b > {}", on_tmpfs.display(), shm.0.display()));
    let cmd = case.writer_of(&on_tmpfs);
    let written = files(&cmd);
    for path in [&on_tmpfs, &shm.0] {
        assert!(written.contains(&("write".into(), bytes_of(path))), "{} not recorded: {written:?}", path.display());
    }
    assert_eq!(case.writer_of(&shm.0)["uuid"], cmd["uuid"]);
}

/// `[read] exclude` and `[write] include` decide what is recorded; a list
/// given in config.toml replaces the default one.
#[test]
fn configured_include_and_exclude_decide_what_is_recorded() {
    let case = Case::new("filters");
    let w = case.work.display();
    case.write_config(&format!("[read]\nexclude = [\"{w}/skip\"]\n\n[write]\ninclude = [\"{w}/keep\"]\n"));
    for dir in ["skip", "read", "keep", "other"] {
        std::fs::create_dir_all(case.work.join(dir)).unwrap();
    }
    case.write("skip/x", b"excluded input\n");
    case.write("read/y", b"recorded input\n");
    case.chown_tree(&case.home);
    case.run_sh("cat skip/x read/y > /dev/null; echo kept > keep/a; echo dropped > other/b");
    let cmd = case.writer_of("keep/a");
    let all = files(&cmd);
    let mut in_work: Vec<_> = all.iter().filter(|(_, p)| p.starts_with(&bytes_of(&case.work))).cloned().collect();
    in_work.sort();
    assert_eq!(
        in_work,
        vec![
            ("read".to_string(), bytes_of(&case.work.join("read/y"))),
            ("write".to_string(), bytes_of(&case.work.join("keep/a")))
        ],
        "only the read outside skip/ and the write inside keep/"
    );
    assert!(same_file(case.query(["wrote", "other/b"])).is_empty());
    assert!(same_file(case.query(["read", "skip/x"])).is_empty());
    // The configured exclude list replaced the default one, which excludes
    // system directories: the shell's and cat's libraries are recorded now.
    assert!(
        all.iter().any(|(a, p)| a == "read" && [&b"/usr/"[..], b"/lib", b"/etc/"].iter().any(|d| p.starts_with(d))),
        "{all:?}"
    );
}

#[test]
fn processes_outside_the_namespace_are_not_attributed() {
    let case = Case::new("outside");
    // An untraced writer in the same directory, running throughout.
    let mut outside = case
        .command("sh")
        .args(["-c", "i=0; while [ ! -e stop ]; do i=$((i+1)); echo x > outside_$i; done"])
        .spawn()
        .unwrap();
    while !case.work.join("outside_20").exists() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    case.run_sh("for i in $(seq 1 300); do echo y > inside_$i; done");
    let written_during = std::fs::read_dir(&case.work).unwrap().count();
    case.write("stop", b"");
    outside.wait().unwrap();

    let cmd = case.writer_of("inside_1");
    let paths = files(&cmd);
    assert_eq!(paths.len(), 300, "only the 300 inside files");
    assert!(paths.iter().all(|(_, p)| p.windows(7).any(|w| w == b"inside_")));
    assert!(written_during > 320, "the outside writer ran concurrently");
    assert!(same_file(case.query(["wrote", "outside_5"])).is_empty());
}

#[test]
fn non_utf8_names_round_trip() {
    let case = Case::new("nonutf8");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9 \xff\xfe\n.txt");
    let out = case.run([std::ffi::OsStr::new("sh"), "-c".as_ref(), "echo x > \"$1\"".as_ref(), "sh".as_ref(), name]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let cmd = case.writer_of(name);
    let want = bytes_of(&case.work.join(name));
    assert_eq!(files(&cmd), vec![("write".to_string(), want.clone())]);
    assert!(cmd["files"][0]["path_hex"].is_string(), "non-UTF-8 names carry their exact bytes");
    // The command text keeps the argument's bytes too.
    let text_hex = cmd["text_hex"].as_str().expect("text_hex for non-UTF-8 text");
    assert!(text_hex.contains("636166e920fffe0a2e747874"), "{text_hex}");
}

#[test]
fn a_hundred_thousand_files_are_all_recorded() {
    let case = Case::new("many");
    case.run_sh("mkdir d && cd d && i=0; while [ $i -lt 100000 ]; do : > f$i; i=$((i+1)); done");
    let summary = case.writer_of("d/f0");
    assert_eq!(summary["file_count"], 100_000);
    assert_eq!(summary["files_truncated"], true, "a big command lists a part unless asked");
    let mut all = case.query(["wrote", "d/f0", "--all-files"]);
    assert_eq!(all.len(), 1);
    let cmd = all.pop().unwrap();
    let writes = files(&cmd).iter().filter(|(a, _)| a == "write").count();
    let dropped: u64 = cmd["incomplete"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(writes, 100_000, "every file recorded (dropped: {})", cmd["incomplete"]);
    assert_eq!(dropped, 0);
    assert_eq!(cmd["complete"], true);
}

#[test]
fn limits_are_counted_never_silent() {
    let case = Case::new("limits");
    case.write_config("[write]\nmax_events = 100\n");
    case.run_sh("for i in $(seq 1 150); do echo > f$i; done");
    let cmd = case.last_command();
    assert_eq!(cmd["complete"], false);
    assert_eq!(cmd["incomplete"]["dropped_write_limit"], 50);
    let listed = case.writer_of("f1");
    assert_eq!(files(&listed).len(), 100);
}

#[test]
fn exit_status_and_signal_death_propagate() {
    check_exit_status(&Case::new("status"));
}

/// Started with SIGCHLD ignored (inherited across exec: a job launcher, a
/// Python program that set SIG_IGN and exec'd it), `prov run` still gets its
/// command's status. With the signal ignored the kernel reaps a child as it
/// exits and its status is gone (seen: `prov run -- sh -c 'exit 3'` exited
/// 1 and stored 1).
#[test]
fn started_with_sigchld_ignored_the_status_is_still_the_commands() {
    let case = Case::new("sigchld-ignored");
    let ignore_and_exec =
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])";
    let out = case
        .command("python3")
        .args(["-c", ignore_and_exec])
        .arg(case.inst.prov())
        .args(["run", "--", "sh", "-c", "echo partial > p; exit 3"])
        .output()
        .unwrap();
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert_eq!(case.writer_of("p")["exit_status"], 3);
}

fn check_exit_status(case: &Case) {
    let out = case.run(["sh", "-c", "echo partial > p; exit 7"]);
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(case.writer_of("p")["exit_status"], 7);

    let out = case.run(["sh", "-c", "echo dying > d; kill -TERM $$"]);
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(128 + 15));
    assert_eq!(case.writer_of("d")["exit_status"], 128 + 15);
}

#[test]
fn stdio_is_untouched() {
    let case = Case::new("stdio");
    let mut child = case
        .command(case.inst.prov())
        .args(["run", "--", "sh", "-c", "read line; echo \"got $line\"; echo oops >&2"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"got hello\n");
    assert_eq!(out.stderr, b"oops\n");
}

/// The core checks again, with root running prov.
#[test]
fn root_is_traced_too() {
    let case = Case::new_as("root", As::Root);
    check_hashes(&case, &[0, 769, 101978]);
    check_rename(&case);
    check_exit_status(&case);
}

#[test]
fn history_lists_newest_first() {
    let case = Case::new("history");
    for i in 0..3 {
        case.run_sh(&format!("echo {i} > h{i}"));
    }
    let history = case.query(["history"]);
    let texts: Vec<_> = history.iter().map(|c| c["text"].as_str().unwrap().to_string()).collect();
    assert_eq!(texts, vec!["sh -c 'echo 2 > h2'", "sh -c 'echo 1 > h1'", "sh -c 'echo 0 > h0'"]);
    assert_eq!(case.query(["history", "-n", "1"]).len(), 1);
}

#[test]
fn configured_hash_parameters_and_database_location_are_used() {
    let case = Case::new("config");
    case.write_config("[database]\npath = \"~/elsewhere/journal.db\"\n\n[hash]\nchunk_size = 16\nchunks = 2\n");
    let data = content(1000, 5);
    case.write("in", &data);
    case.run_sh("cat in > out");
    assert!(case.home.join("elsewhere/journal.db").exists(), "the configured database is used");
    assert!(!case.database().exists(), "not the default one");
    let cmd = case.writer_of("out");
    for f in cmd["files"].as_array().unwrap() {
        assert_eq!((f["hash_chunk_size"].as_u64(), f["hash_chunks"].as_u64()), (Some(16), Some(2)));
        assert_eq!(f["hash"], expected_hash(&data, 16, 2));
    }
}

/// `prov query` run inside a traced command opens, reads and closes the
/// database the command's own collector has open: the collector gets those
/// files as events and must not close them while its connection is open
/// (closing any descriptor of a file drops the process's POSIX locks on it,
/// SQLite's included), or the database ends up corrupt.
#[test]
fn queries_inside_a_traced_command_leave_the_database_intact() {
    let case = Case::new("nested-queries");
    case.run_sh("echo before > before.txt");
    let prov = case.inst.prov();
    let script = format!(
        "for i in $(seq 1 40); do {p} query history -n 2 > /dev/null; {p} run -- sh -c \"echo $i > n$i.txt\"; done; echo done > done.txt",
        p = prov.display()
    );
    let out = case.run(["sh", "-c", &script]);
    assert!(out.status.success(), "{}", describe(&out));
    let check = Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(case.database())
        .arg("PRAGMA integrity_check;")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "ok", "{}", describe(&check));
    let outer = case.writer_of("done.txt");
    assert_eq!(outer["exit_status"], 0);
    assert!(outer["end_ns"].is_i64(), "the outer record has its end: {outer:#}");
    for i in [1, 20, 40] {
        let inner = case.writer_of(format!("n{i}.txt"));
        assert!(inner["text"].as_str().unwrap().contains(&format!("echo {i} > n{i}.txt")), "{inner:#}");
    }
    assert_eq!(case.query(["history", "-n", "100"]).len(), 42);
}

/// The closes a process leaves to its exit are recorded, also those the
/// kernel makes after the tracker's hang-up: the files it still maps (its
/// executable, libraries, here thousands of mapped data files) are released
/// last, after its descriptors. The collector once waited for a quiet queue
/// to catch them; it now waits until that process has exited. The process is
/// a background job that outlives `prov run`'s own child, so nothing but the
/// collector's knowledge of the exit orders its last events before the end.
#[test]
fn closes_made_by_the_last_exit_after_the_hang_up_are_recorded() {
    const MAPPED: usize = 3000;
    let case = Case::new("late-closes");
    let dir = case.work.join("m");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..MAPPED {
        std::fs::write(dir.join(format!("f{i}")), format!("mapped {i}\n")).unwrap();
    }
    case.chown_tree(&dir);
    // Each file stays mapped after its descriptor is closed (libc's mmap:
    // Python's own keeps a descriptor); os._exit skips Python's clean-up, so
    // the kernel unmaps them all in the exit.
    case.write(
        "map.py",
        format!(
            "import ctypes, os\nlibc = ctypes.CDLL(None)\nlibc.mmap.restype = ctypes.c_void_p\n\
             libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, \
             ctypes.c_long]\nfor i in range({MAPPED}):\n    fd = os.open('m/f%d' % i, os.O_RDONLY)\n    \
             libc.mmap(None, 4096, 1, 2, fd, 0)\n    os.close(fd)\nos._exit(0)\n"
        )
        .as_bytes(),
    );
    case.run_sh("python3 map.py > /dev/null 2>&1 &");
    let prefix = [dir.as_os_str().as_bytes(), b"/"].concat();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mapped = loop {
        let readers = case.query(["read", "m/f0", "--all-files"]);
        let mapped = readers
            .first()
            .map(|cmd| files(cmd).iter().filter(|(kind, path)| kind == "read" && path.starts_with(&prefix)).count())
            .unwrap_or(0);
        if mapped == MAPPED || std::time::Instant::now() > deadline {
            break mapped;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(mapped, MAPPED, "every mapped file's read is recorded, with the background job's record");
}

/// A user whom only the system's name service knows (on a cluster: every
/// sssd or LDAP user; here libnss-extrausers, set up in this test's own
/// mount namespace) is named in their records. `prov` is linked
/// statically, and a static glibc program that asks NSS for such a user
/// loads the system's modules and dies in them (exit 139): prov asks
/// `getent` instead, and keeps the answer for an hour.
#[test]
fn a_user_only_the_name_service_knows_is_named_in_the_record() {
    let case = Case::new("nss-only-user");
    let (uid, home) = spare_user_home(&case, 62_000..63_000, "nss-only");
    // The name service as a cluster's: passwd from files, then a module.
    let nss = case.inst.root.join(format!("nss-{uid}"));
    std::fs::create_dir_all(nss.join("extrausers")).unwrap();
    let conf = std::fs::read_to_string("/etc/nsswitch.conf").unwrap();
    let conf: String = conf
        .lines()
        .map(|l| if l.starts_with("passwd:") { "passwd: files systemd extrausers".into() } else { l.to_owned() })
        .map(|l| l + "\n")
        .collect();
    std::fs::write(nss.join("nsswitch.conf"), conf).unwrap();
    let name_as = |name: &str| {
        let entry = format!("{name}:x:{uid}:{}:LDAP user:{}:/bin/sh\n", case.inst.gid, home.display());
        std::fs::write(nss.join("extrausers/passwd"), entry).unwrap();
    };
    name_as("ldap-ada");
    own_mount_namespace();
    for (from, to) in
        [(nss.join("nsswitch.conf"), "/etc/nsswitch.conf"), (nss.join("extrausers"), "/var/lib/extrausers")]
    {
        let mounted = Command::new("mount").arg("--bind").arg(&from).arg(to).status().unwrap();
        assert!(mounted.success(), "bind {} over {to}", from.display());
    }
    let who = Command::new("setpriv").arg(format!("--reuid={uid}")).args(["--", "id", "-un"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&who.stdout).trim(), "ldap-ada", "the test's name service works");
    let run_as_that_user = |file: &str| {
        let mut cmd = command_as_uid(uid, case.inst.gid, &home, case.inst.prov());
        cmd.args(["run", "--", "sh", "-c", &format!("echo {file} > {file}")]).env("PROV_RUN_LINGER", "0");
        let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
        assert_traced(&out);
        assert!(out.status.success(), "{}", describe(&out));
        let mut query = command_as_uid(uid, case.inst.gid, &home, case.inst.prov());
        let out = query.args(["query", "wrote", file, "--json"]).output().unwrap();
        let found = parse_json_lines(&out.stdout);
        assert_eq!(found.len(), 1, "{}", describe(&out));
        found[0]["user"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(run_as_that_user("first.txt"), "ldap-ada");
    let kept = home.join(".local/state/prov/user-name");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), format!("{uid} ldap-ada\n"));
    // Renamed: the name kept is used for the hour it is kept (no process
    // started per command), then asked again.
    name_as("ldap-ada-lovelace");
    assert_eq!(run_as_that_user("second.txt"), "ldap-ada");
    let touched = Command::new("touch").args(["-d", "2 hours ago"]).arg(&kept).status().unwrap();
    assert!(touched.success());
    assert_eq!(run_as_that_user("third.txt"), "ldap-ada-lovelace");
}

/// A user that `/etc/passwd` does not list (on a cluster: every sssd or LDAP
/// user; glibc then loads the system's next NSS module) is traced like any
/// other: the collector and writer work for them, and the record names them
/// by uid when no name is found.
#[test]
fn a_user_unknown_to_etc_passwd_is_traced() {
    let case = Case::new("no-passwd-entry");
    let (uid, home) = spare_user_home(&case, 63_000..64_000, "no-passwd");
    let as_that_user = |args: &[&str]| {
        let mut cmd = command_as_uid(uid, case.inst.gid, &home, case.inst.prov());
        cmd.args(args).stdin(std::process::Stdio::null()).output().unwrap()
    };
    let out = as_that_user(&["run", "--", "sh", "-c", "echo unlisted > unlisted.txt"]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let out = as_that_user(&["query", "wrote", "unlisted.txt", "--json"]);
    let found = parse_json_lines(&out.stdout);
    assert_eq!(found.len(), 1, "{}", describe(&out));
    assert_eq!(found[0]["user"], uid.to_string(), "{}", describe(&out));
    assert_eq!(found[0]["text"], "sh -c 'echo unlisted > unlisted.txt'");
    assert!(files(&found[0]).iter().any(|(how, _)| how == "write"), "{}", describe(&out));
}
