use super::*;

const ES_PEM: &str = include_str!("../../../tests/fixtures/keys/es256.pem");
const ES_SEC1_PEM: &str = include_str!("../../../tests/fixtures/keys/es256-sec1.pem");
const ES_PUB: &str = include_str!("../../../tests/fixtures/keys/es256.pub.pem");
const RS_PEM: &str = include_str!("../../../tests/fixtures/keys/rs256.pem");
const RS_PUB: &str = include_str!("../../../tests/fixtures/keys/rs256.pub.pem");

fn card() -> Value {
    json!({
        "name": "Demo",
        "version": "0.1.0",
        "skills": [{"id": "x", "tags": ["a"]}],
        "capabilities": {"streaming": true},
        "signatures": []
    })
}

#[test]
fn jcs_rfc8785_example() {
    // RFC 8785 §3.2.2 (exact parsing of 333333333.33333329 needs serde_json's
    // `float_roundtrip` feature).
    let v: Value = serde_json::from_str(
        r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]}"#,
    )
    .unwrap();
    assert_eq!(
        canonicalize(&v),
        r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
    );
}

#[test]
fn jcs_sorts_by_utf16_code_units() {
    // RFC 8785 §3.2.3: the emoji (surrogates D83D DE00) sorts before U+FB33.
    let v: Value = serde_json::from_str(
        r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
            "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control",
            "\u00f6":"Latin Small Letter O With Diaeresis"}"#,
    )
    .unwrap();
    let c = canonicalize(&v);
    let order: Vec<&str> = [
        "\\r",
        "\"1\"",
        "\u{80}",
        "\u{f6}",
        "\u{20ac}",
        "\u{1f600}",
        "\u{fb33}",
    ]
    .to_vec();
    let mut last = 0;
    for k in order {
        let at = c.find(k).unwrap_or_else(|| panic!("{k} missing in {c}"));
        assert!(at >= last, "{k} out of order in {c}");
        last = at;
    }
}

#[test]
fn jcs_nested_and_numbers() {
    let v = json!({"b": {"z": [1, {"y": 2.0, "x": -0.5}], "a": null}, "a": 1e21, "c": 1e-7, "d": 123456789012_i64, "e": 0.000001});
    assert_eq!(
        canonicalize(&v),
        r#"{"a":1e+21,"b":{"a":null,"z":[1,{"x":-0.5,"y":2}]},"c":1e-7,"d":123456789012,"e":0.000001}"#
    );
    assert_eq!(es_number(100.0), "100");
    assert_eq!(es_number(1e20), "100000000000000000000");
    assert_eq!(es_number(-1.5e-9), "-1.5e-9");
    assert_eq!(es_number(-0.0), "0");
}

fn round_trip(alg: Alg, key: &str, verify_key: &str, wrong: &str) {
    let signer = CardSigner::new(alg, key, None).unwrap();
    assert_eq!(signer.kid().len(), 16);
    let mut c = card();
    signer.attach(&mut c);
    let sigs = c["signatures"].as_array().unwrap().clone();
    assert_eq!(sigs.len(), 1);
    let h = verify(&c, &sigs[0], Some(verify_key)).unwrap();
    assert_eq!(h.alg, alg.name());
    assert_eq!(h.kid.as_deref(), Some(signer.kid()));
    // The signature does not depend on member order or the signatures array.
    let reordered: Value = serde_json::from_str(&canonicalize(&c)).unwrap();
    verify(&reordered, &sigs[0], Some(verify_key)).unwrap();
    // Tampering fails.
    let mut t = c.clone();
    t["name"] = json!("Evil");
    assert_eq!(
        verify(&t, &sigs[0], Some(verify_key)),
        Err(JwsError::Mismatch)
    );
    // A wrong key fails.
    assert!(verify(&c, &sigs[0], Some(wrong)).is_err());
}

#[test]
fn hs256_round_trip() {
    round_trip(Alg::Hs256, "s3cret", "s3cret", "other");
}

#[test]
fn es256_round_trip() {
    round_trip(Alg::Es256, ES_PEM, ES_PUB, RS_PUB);
    // SEC1 gives the same key, hence the same kid.
    let a = CardSigner::new(Alg::Es256, ES_PEM, None).unwrap();
    let b = CardSigner::new(Alg::Es256, ES_SEC1_PEM, None).unwrap();
    assert_eq!(a.kid(), b.kid());
    let sig = b.sign(&card());
    verify(&card(), &sig, Some(ES_PUB)).unwrap();
    let raw = URL_SAFE_NO_PAD
        .decode(sig["signature"].as_str().unwrap())
        .unwrap();
    assert_eq!(raw.len(), 64);
}

#[test]
fn rs256_round_trip() {
    round_trip(Alg::Rs256, RS_PEM, RS_PUB, ES_PUB);
}

#[test]
fn private_key_pem_verifies_too() {
    for (alg, pem, other) in [
        (Alg::Es256, ES_PEM, RS_PEM),
        (Alg::Es256, ES_SEC1_PEM, RS_PEM),
        (Alg::Rs256, RS_PEM, ES_PEM),
    ] {
        let sig = CardSigner::new(alg, pem, None).unwrap().sign(&card());
        verify(&card(), &sig, Some(pem)).unwrap();
        assert!(verify(&card(), &sig, Some(other)).is_err());
    }
}

#[test]
fn verify_with_header_jwk() {
    let signer = CardSigner::new(Alg::Es256, ES_PEM, Some("k1".into())).unwrap();
    let vk = p256::ecdsa::VerifyingKey::from_public_key_pem(ES_PUB).unwrap();
    let p = vk.to_encoded_point(false);
    let header = json!({"alg": "ES256", "typ": "JOSE", "kid": "k1", "jwk": {
        "kty": "EC", "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(p.x().unwrap()),
        "y": URL_SAFE_NO_PAD.encode(p.y().unwrap())}});
    let protected = URL_SAFE_NO_PAD.encode(canonicalize(&header));
    let input = signing_input(&protected, &card());
    let SignKey::Es(sk) = &signer.key else {
        panic!("ES256 key")
    };
    let s: p256::ecdsa::Signature = sk.sign(input.as_bytes());
    let sig = json!({"protected": protected, "signature": URL_SAFE_NO_PAD.encode(s.to_bytes())});
    assert_eq!(
        verify(&card(), &sig, None).unwrap().kid.as_deref(),
        Some("k1")
    );
    // Without a jwk and without a key there is nothing to verify with.
    let plain = signer.sign(&card());
    assert_eq!(
        verify(&card(), &plain, None),
        Err(JwsError::NoKey(Alg::Es256))
    );
}

#[test]
fn bad_keys_and_algs() {
    assert!(matches!(Alg::parse("none"), Err(JwsError::UnknownAlg(_))));
    assert_eq!(Alg::parse("es256"), Ok(Alg::Es256));
    assert!(CardSigner::new(Alg::Es256, "not a pem", None).is_err());
    assert!(CardSigner::new(Alg::Rs256, ES_PEM, None).is_err());
    assert!(CardSigner::new(Alg::Hs256, "", None).is_err());
    let s = CardSigner::new(Alg::Hs256, "x", Some("mine".into())).unwrap();
    assert_eq!(s.kid(), "mine");
    assert!(!format!("{s:?}").contains("\"x\""));
}
