//! Every secret shape an outside attack found in the journal, the process
//! table, the report and the central store, through the default redactor:
//! the secret goes, the rest of the command stays. (The false-positive side
//! is redact_history.rs: an ordinary history keeps its commands.)

use prov_model::redact::{RedactConfig, Redactor, MARK};

/// (command, the secret in it).
const LEAKED: &[(&str, &str)] = &[
    ("export TOKEN=$'s3cr3t\\'x'", "s3cr3t\\'x"),
    ("curl -H 'X-Api-Key: K3yval9' https://api.example.org", "K3yval9"),
    ("curl -H \"X-Auth-Token: tok123abc\" https://api.example.org", "tok123abc"),
    ("curl -H 'X-Goog-Api-Key: AbCdEf123' https://vision.googleapis.com", "AbCdEf123"),
    ("curl -H 'Cookie: session=sEss10n; theme=dark' https://x.org", "sEss10n; theme=dark"),
    ("az storage blob upload --sas-token 'sv=2020&sig=s1gval' -f a", "sv=2020&sig=s1gval"),
    ("az storage blob list --account-key acctK3y== -c c", "acctK3y=="),
    (
        "export AZURE_STORAGE_CONNECTION_STRING='DefaultEndpointsProtocol=https;AccountName=a;AccountKey=c0nnK3y==;EndpointSuffix=core.windows.net'",
        "c0nnK3y==",
    ),
    ("curl -o f 'https://a.blob.core.windows.net/c/f?sv=2020-08-04&se=2021&sig=s1gn4ture%3D'", "s1gn4ture%3D"),
    ("openssl rsa -in key.pem -passin pass:0pensslpw -out k.pem", "0pensslpw"),
    ("openssl req -new -key k.pem -passout pass:0utpw -out r.csr", "0utpw"),
    ("docker login -u me -p d0ckerpw registry.example.org", "d0ckerpw"),
    ("az login -u me@example.org -p 4zpassw0rd", "4zpassw0rd"),
    ("ldapsearch -x -D cn=admin,dc=x -w ld4ppw -b dc=x", "ld4ppw"),
    ("smbclient //srv/share -U alice%sm6pw", "sm6pw"),
    ("MYSQL_PWD=mysq1pw mysql -u root db", "mysq1pw"),
    ("aws configure set aws_secret_access_key awsS3cretKey", "awsS3cretKey"),
    ("mc admin user add local --secret-key m1n1os3cret", "m1n1os3cret"),
    ("curl -d '{\"username\": \"a\", \"password\": \"js0npw\"}' https://x.org", "js0npw"),
    ("echo 'machine example.org login alice password n3trcpw' >> ~/.netrc", "n3trcpw"),
    ("git clone https://t0kenAsUserName1234567890@example.org/r.git", "t0kenAsUserName1234567890"),
    ("curl -u :curlpw https://x.org", "curlpw"),
    ("htpasswd -b /etc/nginx/.htpasswd alice htpassw0rd", "htpassw0rd"),
    ("htpasswd -nbB alice htnbpw > line", "htnbpw"),
    // Shapes caught before.
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("echo ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8 | gh auth login --with-token", "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8"),
    ("curl -H 'Authorization: Bearer b34rer' https://x.org", "b34rer"),
    ("mysql -u root -pmysqlpw db", "mysqlpw"),
    ("psql --password=pgpw -h db", "pgpw"),
    ("git clone https://alice:urlpw@example.org/r.git", "urlpw"),
    ("sshpass -p sshpw ssh host", "sshpw"),
];

#[test]
fn every_leaked_shape_is_redacted_and_the_command_kept() {
    let r = Redactor::new(&RedactConfig::default());
    let mut leaked = Vec::new();
    for &(text, secret) in LEAKED {
        let red = String::from_utf8(r.redact(text.as_bytes())).unwrap();
        if red.contains(secret) || !red.contains(MARK) {
            leaked.push((text, red.clone()));
        }
        // Only the secret went: what is left of the command is as typed.
        let (before, after) = text.split_at(text.find(secret).unwrap());
        let after = &after[secret.len()..];
        assert!(red.starts_with(&before[..before.len().min(8)]), "{red}");
        assert!(red.ends_with(&after[after.len().saturating_sub(4)..]), "{text} -> {red}");
    }
    assert!(leaked.is_empty(), "{} of {} shapes leaked: {leaked:#?}", leaked.len(), LEAKED.len());
}
