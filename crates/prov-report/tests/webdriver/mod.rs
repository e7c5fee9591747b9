//! Just enough of a W3C WebDriver client to drive Debian's headless
//! Chromium through chromedriver on localhost: open a file, run a script,
//! click like a user, take a screenshot. Shared by the report's browser test
//! (crates/prov-report/tests/browser.rs) and the end-to-end test
//! (tests/report.rs), which includes this file by path.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's /usr/bin/chromium is a wrapper script; chromedriver wants the binary.
const CHROMIUM: [&str; 2] = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"];

pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile and
    /// a 1400x1000 window.
    pub fn start() -> Browser {
        assert!(
            Path::new(CHROMEDRIVER).exists(),
            "{CHROMEDRIVER} is missing: install Debian's chromium and chromium-driver (.ci/run does)"
        );
        let chromium = CHROMIUM.iter().find(|p| Path::new(p).exists()).expect("chromium is not installed");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = std::env::temp_dir().join(format!("prov-report-chromium-{}-{port}", std::process::id()));
        let mut browser = Browser { driver, port, session: String::new(), profile };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !browser.request("GET", "/status", None).is_ok_and(|v| v["value"]["ready"] == true) {
            assert!(Instant::now() < deadline, "chromedriver did not become ready on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--window-size=1400,1000",
                         format!("--user-data-dir={}", browser.profile.display())]
            }
        }}});
        let v = browser.call("POST", "/session", Some(caps));
        browser.session = v["value"]["sessionId"].as_str().expect("a session id").to_string();
        browser
    }

    pub fn open(&self, file: &Path) {
        let url = format!("file://{}", std::fs::canonicalize(file).unwrap().display());
        self.session_call("POST", "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body: use `return`) in the page.
    pub fn eval(&self, script: &str) -> Value {
        self.session_call("POST", "/execute/sync", Some(json!({ "script": script, "args": [] })))
    }

    /// Evaluates `script` until it returns something truthy; returns that.
    pub fn wait_for(&self, script: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(script);
            let truthy = !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for: {script}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The WebDriver ids of the elements matching a CSS selector.
    pub fn find_all(&self, css: &str) -> Vec<String> {
        let v = self.session_call("POST", "/elements", Some(json!({"using": "css selector", "value": css})));
        v.as_array().unwrap().iter().map(element_id).collect()
    }

    /// A real click on an element (scrolled into view first), as a user would.
    pub fn click(&self, element: &str) {
        self.session_call("POST", &format!("/element/{element}/click"), Some(json!({})));
    }

    /// Types into an element.
    pub fn type_into(&self, element: &str, text: &str) {
        self.session_call("POST", &format!("/element/{element}/value"), Some(json!({ "text": text })));
    }

    /// A mouse click at viewport coordinates.
    pub fn click_at(&self, x: f64, y: f64) {
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [
                {"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x.round() as i64, "y": y.round() as i64},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerUp", "button": 0}
            ]
        }]});
        self.session_call("POST", "/actions", Some(actions));
        self.session_call("DELETE", "/actions", None);
    }

    /// A mouse wheel turn at viewport coordinates (negative `delta_y`: up).
    pub fn wheel_at(&self, x: f64, y: f64, delta_y: i64) {
        let actions = json!({"actions": [{
            "type": "wheel", "id": "wheel",
            "actions": [{"type": "scroll", "origin": "viewport", "x": x.round() as i64, "y": y.round() as i64,
                         "deltaX": 0, "deltaY": delta_y, "duration": 0}]
        }]});
        self.session_call("POST", "/actions", Some(actions));
        self.session_call("DELETE", "/actions", None);
    }

    /// Clicks command `id`'s box on the report's timeline with the mouse:
    /// brings it into view (through the page's own selection), turns the
    /// wheel over it until a few pixels around its middle hit it alone,
    /// clears the details panel, and clicks the middle of the box.
    pub fn click_timeline_box(&self, id: i64) {
        // The selection brings the box into view; the details panel is then
        // cleared before anything is located, so that the page's height (and
        // the scroll clamped to it) is the same when the click comes.
        self.eval(&format!(
            "provReport.select({id}); const d = document.getElementById('details'); d.replaceChildren(); \
             delete d.dataset.command; document.getElementById('timeline').scrollIntoView(); return true"
        ));
        let locate = format!(
            "const b = provReport.boxCenter({id}); const r = document.getElementById('tl-canvas').getBoundingClientRect(); \
             const hit = [-2, 0, 2].map((dx) => provReport.commandAt(b.x + dx, b.y)); \
             return [r.left + b.x, r.top + b.y, hit.every((h) => h === {id}) ? {id} : hit]"
        );
        let mut at = self.eval(&locate);
        for _ in 0..40 {
            if at[2] == id {
                break;
            }
            self.wheel_at(at[0].as_f64().unwrap(), at[1].as_f64().unwrap(), -400);
            at = self.eval(&locate);
        }
        assert_eq!(at[2], id, "command {id} is not alone under its box's centre");
        self.click_at(at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        let v = self.session_call("GET", "/screenshot", None);
        base64_decode(v.as_str().expect("base64 screenshot"))
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)["value"].take()
    }

    /// A WebDriver call that must succeed; returns the whole response object.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let v = self.request(method, path, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        if let Some(err) = v["value"]["error"].as_str() {
            panic!("{method} {path}: {err}: {}", v["value"]["message"]);
        }
        v
    }

    /// One HTTP/1.1 exchange with chromedriver (a new connection each time).
    fn request(&self, method: &str, path: &str, body: Option<Value>) -> std::io::Result<Value> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        )?;
        // chromedriver may keep the connection open: read the header, then
        // exactly the body it announces.
        let mut response = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        let split = loop {
            if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            let got = stream.read(&mut buf)?;
            if got == 0 {
                return Err(bad("connection closed before the HTTP header ended"));
            }
            response.extend_from_slice(&buf[..got]);
        };
        let head = String::from_utf8_lossy(&response[..split]).to_lowercase();
        let mut payload = response.split_off(split + 4);
        let length =
            head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok());
        let complete = |p: &[u8]| match length {
            Some(n) => p.len() >= n,
            None => p.ends_with(b"0\r\n\r\n"),
        };
        while !complete(&payload) {
            let got = stream.read(&mut buf)?;
            if got == 0 {
                break;
            }
            payload.extend_from_slice(&buf[..got]);
        }
        if length.is_none() && head.contains("transfer-encoding: chunked") {
            payload = dechunk(&payload).ok_or_else(|| bad("bad chunked body"))?;
        }
        serde_json::from_slice(&payload).map_err(|e| bad(&format!("response is not JSON: {e}")))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.request("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

fn element_id(v: &Value) -> String {
    // The W3C element reference key.
    v["element-6066-11e4-a52e-4f735466cecf"].as_str().expect("an element reference").to_string()
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line_end]).ok()?.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        let chunk = body.get(line_end + 2..line_end + 2 + size)?;
        out.extend_from_slice(chunk);
        body = body.get(line_end + 4 + size..)?;
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {:?}", c as char),
    };
    let digits: Vec<u8> = s.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).map(value).collect();
    digits
        .chunks(4)
        .flat_map(|q| {
            let n = q.iter().enumerate().fold(0u32, |n, (k, &d)| n | (d as u32) << (18 - 6 * k));
            let bytes = n.to_be_bytes();
            bytes[1..q.len()].to_vec()
        })
        .collect()
}

/// Width and height of a PNG, after checking its signature and header.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR", "not a PNG");
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Where the tests put what a person may want to look at: `<target>/test-output`.
pub fn test_output_dir(target_tmpdir: &str) -> PathBuf {
    let dir = Path::new(target_tmpdir).parent().unwrap().join("test-output");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
